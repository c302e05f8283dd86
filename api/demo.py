"""`sluice serve --demo`: a demo fleet and an executor that makes its queues move.

The fleet (fixtures/service_fleets.py) is the seed's two teams on one pool of GPU
clusters: `research` and `inference-eval` with the seed's caps, plus the `default` queue
and a small strict_fifo queue for gang-style training, so the head-of-line banner shows
up. The executor submits a steady stream of work, starts what the tick
schedules and finishes it after a simulated run time.

Beside them, the quota-shares seed's example (fixtures/quota-shares-seed.yaml):
job queue `training` on a SAGEMAKER_TRAINING environment of 3 ml.g5.xlarge,
split into three shares of 1 (LEND_AND_BORROW, LEND, RESERVE). Jobs arrive
mostly in project-a, which then borrows project-b's idle instance; now and then
a project-b job arrives while project-a borrows, and the tick reclaims the
instance by preempting a project-a job (back in its line, never reported done).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.store.records import JobPhase, Listing, Phase, ReportedOutcome, Store
from fixtures.service_fleets import DEMO_CLUSTERS, DEMO_GPU_POOL, DEMO_QUEUES
from models.errors import (
    AlreadyExists,
    ErrorCode,
    FailedPrecondition,
    InvalidInput,
    SluiceError,
)
from models.quota import Job, SchedulingPolicy, ServiceEnvironment
from models.quota import JobQueue as QuotaJobQueue
from models.snapshot import Action, Environment, Queue
from models.triggers import Trigger

log = logging.getLogger("sluice.demo")
_DEMO_CHILD = {"resources": {"cpu": "4", "memory": "16Gi"}}

# The seed's non-overlap: "give the trigger a serialized queue (run_concurrency 1) and you
# get self-non-overlapping scheduled jobs for free." Runs fire every 10 s and take 5 to 20 s
# (the executor's default), so now and then a run waits for the one before it.
DEMO_SERIAL_QUEUE = Queue(name="nightly-runs", pool=DEMO_GPU_POOL, run_concurrency=1)
DEMO_TRIGGER = Trigger.model_validate(
    {
        "name": "nightly",
        "schedule": {"every": "10s"},
        "queue": DEMO_SERIAL_QUEUE.name,
        # "Inside each run, children still fan out freely": three actions per run.
        "actions": [{"containers": [_DEMO_CHILD]}] * 3,
    }
)

DEMO_ENVIRONMENTS = [
    Environment.model_validate(
        {
            "name": "embedder",
            "queue": "research",
            "replicas": 2,
            "resources": {"cpu": "2", "memory": "8Gi"},
            "gpu": "T4:1",
        }
    )
]


# The quota-shares seed's example: "drie projectshares elk op max_capacity=1 voor ml.g5.xlarge
# ... een maximale capaciteit van 3 ... LEND_AND_BORROW, LEND en RESERVE".
G5 = "ml.g5.xlarge"
DEMO_JOB_QUEUE = "training"
DEMO_SCHEDULING_POLICY = SchedulingPolicy.model_validate(
    {"name": "quota-policy", "quota_share_policy": {"idle_resource_assignment_strategy": "FIFO"}}
)
DEMO_SERVICE_ENVIRONMENT = ServiceEnvironment.model_validate(
    {"name": "sagemaker-g5", "type": "SAGEMAKER_TRAINING", "capacity_limits": {G5: 3}}
)
DEMO_JOB_QUEUES = [
    QuotaJobQueue.model_validate(
        {
            "name": DEMO_JOB_QUEUE,
            "scheduling_policy": DEMO_SCHEDULING_POLICY.name,
            "service_environment": DEMO_SERVICE_ENVIRONMENT.name,
            "quota_shares": [
                {"name": "project-a", "capacity_limits": {G5: 1}, "strategy": "LEND_AND_BORROW"},
                {"name": "project-b", "capacity_limits": {G5: 1}, "strategy": "LEND"},
                {"name": "project-c", "capacity_limits": {G5: 1}, "strategy": "RESERVE"},
            ],
        }
    )
]
BORROWER, LENDER, RESERVER = "project-a", "project-b", "project-c"
_JOB_SECONDS = (10.0, 40.0)  # simulated run time of a demo job
_BORROWER_LINE = 2  # project-a's line is topped up to this: it always has a job to borrow for
# Simulated seconds between a lender's (project-b) arrivals, and a reserver's (project-c). A
# project-b job arrives only while project-a borrows and project-b holds nothing, so each one
# reclaims its instance: the next tick preempts a project-a job.
_LENDER_GAP_S = (30.0, 90.0)
_RESERVER_GAP_S = (45.0, 120.0)
_FIRST_ARRIVAL_S = (10.0, 30.0)


@dataclass(frozen=True)
class _Template:
    """One kind of demo work: its queue, containers and simulated run time."""

    prefix: str
    queue: str
    containers: list[dict[str, Any]]
    seconds: tuple[float, float]
    environment: str | None = None


def _container(cpu: str, memory: str, gpu: str | int | None = None, name: str = "main") -> dict:
    resources: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpu is not None:
        resources["gpu"] = gpu
    return {"name": name, "resources": resources}


# (template, share of the stream, how many to keep waiting in its queue)
_WORK: list[tuple[_Template, int]] = [
    (_Template("train", "research", [_container("32", "256Gi", "H100:8")], (20, 60)), 3),
    (_Template("sweep", "research", [_container("4", "32Gi", "H100:1")], (8, 25)), 8),
    (_Template("probe", "research", [_container("2", "8Gi", 1)], (5, 15)), 3),
    (_Template("embed", "research", [], (3, 10), environment="embedder"), 4),
    (_Template("eval", "inference-eval", [_container("16", "64Gi", "H100:4")], (10, 30)), 5),
    (_Template("eval-small", "inference-eval", [_container("4", "16Gi", "H100:1")], (5, 15)), 5),
    (
        _Template(
            "gang",
            "gang-train",
            [_container("48", "512Gi", "H100:8", name=f"worker-{i}") for i in range(3)],
            (25, 50),
        ),
        1,
    ),
    (_Template("finetune", "gang-train", [_container("8", "64Gi", "H100:2")], (10, 20)), 2),
    (_Template("etl", "default", [_container("4", "8Gi")], (5, 20)), 4),
]
_KEEP_WAITING = {"research": 25, "inference-eval": 12, "gang-train": 4, "default": 6}
_IDLE_POOL_S = 20.0  # a reusable pool with nothing to run shuts down after this


def load_demo_fleet(store: Store) -> None:
    """Put the demo clusters, queues and environment; what already exists is kept."""
    existing = {cluster.name for cluster in store.list_clusters()}
    for cluster in DEMO_CLUSTERS:
        if cluster.name not in existing:
            store.put_cluster(cluster)
    for queue in (*DEMO_QUEUES, DEMO_SERIAL_QUEUE):
        with contextlib.suppress(AlreadyExists):
            store.create_queue(queue)
    if DEMO_TRIGGER.name not in {record.trigger.name for record in store.list_triggers()}:
        store.create_trigger(DEMO_TRIGGER, datetime.now(UTC))
    known = {record.environment.name for record in store.list_environments()}
    for environment in DEMO_ENVIRONMENTS:
        if environment.name not in known:
            store.put_environment(environment)
    if DEMO_SCHEDULING_POLICY.name not in {p.name for p in store.list_scheduling_policies()}:
        store.put_scheduling_policy(DEMO_SCHEDULING_POLICY)
    if DEMO_SERVICE_ENVIRONMENT.name not in {e.name for e in store.list_service_environments()}:
        store.put_service_environment(DEMO_SERVICE_ENVIRONMENT)
    for job_queue in DEMO_JOB_QUEUES:
        try:
            store.create_job_queue(job_queue)
        except AlreadyExists:
            pass
        except InvalidInput as error:  # someone's own policy or environment of that name
            log.warning("demo: job queue %s not loaded: %s", job_queue.name, error.message)


class DemoExecutor:
    """Starts scheduled actions, finishes them after a simulated time, keeps work coming."""

    def __init__(self, store: Store, seed: int = 7, step_s: float = 0.5) -> None:
        self.store = store
        self.step_s = step_s
        self._random = random.Random(seed)
        self._finish_at: dict[str, float] = {}
        self._run_times: dict[str, tuple[float, float]] = {}  # by action id, from its template
        self._pool_idle_since: dict[str, float] = {}
        self._serial = 0
        # The job queues' stream has its own generator, so the actions' stream is unchanged.
        self._jobs_random = random.Random(f"quota-shares-{seed}")
        self._job_finish_at: dict[str, float] = {}  # by job id, while it holds instances
        self._next_arrival: dict[str, float] = {}  # by share: the earliest next project-b/c job
        self._job_serial = 0
        self.preempted_seen = 0  # jobs the executor saw preempted (and so never reported done)
        self.deadlines_stopped = 0  # actions it stopped because their deadline came

    async def run_forever(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.step, time.monotonic())
            except SluiceError as error:  # a race with a person using the API: try again
                log.info("demo step skipped: %s", error.message)
            await asyncio.sleep(self.step_s)

    def step(self, clock: float) -> None:
        now = datetime.now(UTC)
        for record in self.store.list_actions(
            phase=Phase.SCHEDULED, listing=Listing(limit=2000)
        ).items:
            self.store.report(record.action.id, ReportedOutcome.STARTED, now)
            low, high = self._run_times.pop(record.action.id, (5.0, 20.0))
            self._finish_at[record.action.id] = clock + self._random.uniform(low, high)
        running = self.store.list_actions(phase=Phase.RUNNING, listing=Listing(limit=5000)).items
        self._stop_past_deadline({record.action.id for record in running}, now)
        for record in running:
            action_id = record.action.id
            # Actions running before a restart get a run time when first seen.
            due = self._finish_at.setdefault(action_id, clock + self._random.uniform(5, 20))
            if clock >= due:
                del self._finish_at[action_id]
                if self._random.random() < 0.03:
                    self.store.report(
                        action_id,
                        ReportedOutcome.FAILED,
                        now,
                        message="demo: simulated task failure",
                    )
                else:
                    self.store.report(action_id, ReportedOutcome.SUCCEEDED, now)
        self._stop_idle_pools(clock)
        self._submit_more(now)
        self._run_jobs(clock, now)
        self._submit_jobs(clock, now)

    def _stop_past_deadline(self, running: set[str], now: datetime) -> None:
        """Stop what is no longer running: an action the service failed at its deadline is
        acknowledged with a report `failed`; one cancelled is just forgotten."""
        for action_id in [one for one in self._finish_at if one not in running]:
            del self._finish_at[action_id]
            if self.store.get_action(action_id).code is ErrorCode.DEADLINE_EXCEEDED:
                self.store.report(action_id, ReportedOutcome.FAILED, now)
                self.deadlines_stopped += 1

    def _run_jobs(self, clock: float, now: datetime) -> None:
        """Start the jobs the tick scheduled (STARTING, then RUNNING at the next pass) and
        finish running ones when their time is up.

        A job the tick preempted is QUEUED again (back in its share's line): its run is
        forgotten, and a report that races with a preemption is refused (409), so it is
        stopped rather than reported.
        """
        scheduled, starting, running = (
            self.store.list_jobs(phase=phase, listing=Listing(limit=1000)).items
            for phase in (JobPhase.SCHEDULED, JobPhase.STARTING, JobPhase.RUNNING)
        )
        holding = {record.job.id for record in (*scheduled, *starting, *running)}
        for job_id in [job_id for job_id in self._job_finish_at if job_id not in holding]:
            del self._job_finish_at[job_id]
            self._note_preempted(job_id)
        for records, outcome in (
            (starting, ReportedOutcome.STARTED),
            (scheduled, ReportedOutcome.STARTING),
        ):
            for record in records:
                job_id = record.job.id
                try:
                    self.store.report_job(job_id, outcome, now)
                except FailedPrecondition as error:  # preempted (or cancelled) since listed
                    log.info("demo: job %s not %s: %s", job_id, outcome.value, error.message)
                    continue
                if outcome is ReportedOutcome.STARTING:  # its run time counts from here
                    self._job_finish_at[job_id] = clock + self._jobs_random.uniform(*_JOB_SECONDS)
        for record in running:
            job_id = record.job.id
            # Jobs running before a restart get a run time when first seen.
            due = self._job_finish_at.setdefault(
                job_id, clock + self._jobs_random.uniform(*_JOB_SECONDS)
            )
            if clock < due:
                continue
            del self._job_finish_at[job_id]
            try:
                self.store.report_job(job_id, ReportedOutcome.SUCCEEDED, now)
            except FailedPrecondition as error:  # the tick preempted it just now: stop it
                log.info("demo: job %s stopped, not finished: %s", job_id, error.message)

    def _note_preempted(self, job_id: str) -> None:
        with contextlib.suppress(SluiceError):
            record = self.store.get_job(job_id)
            if record.phase is JobPhase.QUEUED and record.last_preemption is not None:
                self.preempted_seen += 1
                log.info(
                    "demo: job %s preempted, back in line: %s",
                    job_id,
                    record.last_preemption.message,
                )

    def _submit_jobs(self, clock: float, now: datetime) -> None:
        """Keep project-a's line topped up, and now and then a project-b or project-c job."""
        counts = self.store.share_counts(DEMO_JOB_QUEUE)
        empty = (0, 0)

        def live(share: str) -> tuple[int, int]:
            """Its jobs waiting and holding instances."""
            found = counts.get((DEMO_JOB_QUEUE, share))
            if found is None:
                return empty
            return found.queued, found.scheduled + found.starting + found.running

        shares: list[str] = []
        queued, holding = live(BORROWER)
        borrowing = holding > 1  # above its limit of 1
        shares += [BORROWER] * max(0, _BORROWER_LINE - queued)
        for share, gap in ((LENDER, _LENDER_GAP_S), (RESERVER, _RESERVER_GAP_S)):
            due = self._next_arrival.setdefault(
                share, clock + self._jobs_random.uniform(*_FIRST_ARRIVAL_S)
            )
            idle = live(share) == empty
            if clock >= due and idle and (share != LENDER or borrowing):
                shares.append(share)
                self._next_arrival[share] = clock + self._jobs_random.uniform(*gap)
        for share in shares:
            self._job_serial += 1
            job = Job(
                id=f"{share.removeprefix('project-')}-{now:%H%M%S}-{self._job_serial}",
                job_queue=DEMO_JOB_QUEUE,
                share=share,
                instance_type=G5,
                submitted_at=now,
            )
            try:
                self.store.submit_job(job)
            except SluiceError as error:  # the queue was disabled or changed by someone
                log.info("demo: job not submitted to %s: %s", DEMO_JOB_QUEUE, error.message)
                return

    def _stop_idle_pools(self, clock: float) -> None:
        running = [
            record.environment.name
            for record in self.store.list_environments()
            if record.environment.running
        ]
        if not running:
            return
        busy = {
            record.action.environment
            for phase in (Phase.QUEUED, Phase.SCHEDULED, Phase.RUNNING)
            for record in self.store.list_actions(phase=phase, listing=Listing(limit=5000)).items
            if record.action.environment
        }
        for name in running:
            if name in busy:
                self._pool_idle_since.pop(name, None)
                continue
            since = self._pool_idle_since.setdefault(name, clock)
            if clock - since >= _IDLE_POOL_S:
                try:
                    self.store.stop_environment(name)
                except FailedPrecondition:
                    continue
                self._pool_idle_since.pop(name, None)
                log.info("demo: reusable pool %s idle for %.0f s, stopped", name, _IDLE_POOL_S)

    def _submit_more(self, now: datetime) -> None:
        counts = self.store.queue_counts()
        templates = [template for template, _ in _WORK]
        weights = [weight for _, weight in _WORK]
        for queue, keep in _KEEP_WAITING.items():
            waiting = counts[queue].queued if queue in counts else 0
            if waiting >= keep:
                continue
            choices = [(t, w) for t, w in zip(templates, weights, strict=True) if t.queue == queue]
            batch = []
            for _ in range(min(keep - waiting, 3)):
                template = self._random.choices(
                    [t for t, _ in choices], weights=[w for _, w in choices]
                )[0]
                self._serial += 1
                action_id = f"{template.prefix}-{now:%H%M%S}-{self._serial}"
                self._run_times[action_id] = template.seconds
                batch.append(
                    Action.model_validate(
                        {
                            "id": action_id,
                            "run": f"{template.prefix}-run-{self._serial // 4}",
                            "queue": queue,
                            "submitted_at": now,
                            "containers": template.containers,
                            "environment": template.environment,
                            "max_queued_time": "10m",
                        }
                    )
                )
            self.store.submit(batch)
