"""What the store holds and hands out: record types, their enums, and the Store interface.

The service reaches durable state only through `Store` (api.store.sql_store.SqlStore is the
implementation). Records are plain frozen dataclasses around the domain models, with the
life the store tracks beside them (phase, times, the last preemption).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from models.errors import ErrorCode, FailedPrecondition, SluiceError
from models.explanation import Explanation
from models.forecast import FinishedRun, StartForecast
from models.quota import (
    Job,
    JobQueue,
    JobQueueStatus,
    SchedulingPolicy,
    ServiceEnvironment,
)
from models.quota_result import PreemptReason
from models.result import TickResult, result_summary, result_text
from models.snapshot import (
    Action,
    Cluster,
    Environment,
    Placement,
    Queue,
    Settings,
    Snapshot,
)
from models.tasks import QueueSource, TaskTemplate
from models.triggers import FiringOutcome, Trigger


class Phase(StrEnum):
    """Where an action is in its life. Only the first three hold a place in the queue."""

    QUEUED = "queued"
    SCHEDULED = "scheduled"  # the tick placed it; charges count from here
    RUNNING = "running"  # an executor reported it started
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def live(self) -> bool:
        return self in LIVE_PHASES

    @property
    def charged(self) -> bool:
        """Scheduled and unfinished: what a queue's caps count."""
        return self in (Phase.SCHEDULED, Phase.RUNNING)


LIVE_PHASES = (Phase.QUEUED, Phase.SCHEDULED, Phase.RUNNING)


class Order(StrEnum):
    """Which way a listing runs through arrival order."""

    ASC = "asc"  # oldest first
    DESC = "desc"  # newest first


@dataclass(frozen=True)
class Listing:
    """One page of a listing of actions or jobs: keyset pagination over arrival order.

    A page starts after the arrival number `after` the previous page ended at, so pages
    stay right while rows are added (no offset that shifts under the reader).
    """

    limit: int = 100
    order: Order = Order.ASC
    after: int | None = None
    submitted_after: datetime | None = None  # both bounds exclusive
    submitted_before: datetime | None = None


FIRST_PAGE = Listing()

R = TypeVar("R")


@dataclass(frozen=True)
class Page(Generic[R]):
    items: list[R]
    next_after: int | None  # where the next page starts; None on the last page


@dataclass(frozen=True)
class QueueRecord:
    queue: Queue  # settings, with head_blocked_since as persisted by the last tick
    draining: bool


@dataclass(frozen=True)
class QueueCounts:
    """Live actions of one queue, counted in the store (not by a tick)."""

    queued: int = 0
    scheduled: int = 0
    running: int = 0

    @property
    def depth_used(self) -> int:
        """In flight plus waiting: what the depth limit counts."""
        return self.queued + self.scheduled + self.running


@dataclass(frozen=True)
class Retention:
    """How long finished actions, and apart from them finished jobs, are kept: `max_age`
    since they finished, and at most `max_count` of each (the newest); None leaves that bound
    out."""

    max_age: timedelta | None = timedelta(days=7)
    max_count: int | None = 100_000


UNSPECIFIED_CODE = "UNSPECIFIED"  # the failure code of an executor's report that gave none


@dataclass(frozen=True)
class ActionTotals:
    """One queue's actions counted over every row the store holds (so a restart keeps them).

    `wait_le[i]` counts the scheduled actions that waited at most `bounds_s[i]` seconds
    from submission to scheduling (the bounds `Store.action_totals` was given).
    """

    submitted: int = 0
    scheduled: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # by error code
    wait_le: tuple[int, ...] = ()
    wait_sum_s: float = 0.0


@dataclass(frozen=True)
class ActionRecord:
    action: Action  # as submitted (state queued, no placement)
    phase: Phase
    placement: Placement | None
    code: ErrorCode | None
    message: str | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    queue_source: QueueSource | None = None  # None for actions stored before schema 4

    @classmethod
    def submitted(cls, action: Action, queue_source: QueueSource | None = None) -> ActionRecord:
        """The record of an action just submitted."""
        return cls(action, Phase.QUEUED, None, None, None, None, None, None, queue_source)


@dataclass(frozen=True)
class Routing:
    """How a submission's queues were chosen: each action's queue source (by id) and the
    queues its runs are created with (by run)."""

    sources: dict[str, QueueSource] = field(default_factory=dict)
    run_queues: dict[str, str] = field(default_factory=dict)


NOT_ROUTED = Routing()


@dataclass(frozen=True)
class Submission:
    """One submission's actions, stored all or none, and how their queues were chosen."""

    actions: list[Action]
    routing: Routing = NOT_ROUTED


@dataclass(frozen=True)
class EnvironmentRecord:
    environment: Environment  # running and placement filled in
    idle_timeout: timedelta | None = None  # the service stops it after this long unused


class ReportedOutcome(StrEnum):
    """What an executor reports about a scheduled action or a job holding instances."""

    STARTING = "starting"  # jobs only: the executor is starting its containers
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# -- quota-managed job queues ------------------------------------------------------------------


class JobPhase(StrEnum):
    """Where a job is in its life; the first four are live (in a line or holding instances)."""

    QUEUED = "QUEUED"
    SCHEDULED = "SCHEDULED"  # the tick gave it its instances
    STARTING = "STARTING"  # an executor reported it is starting its containers
    RUNNING = "RUNNING"  # an executor reported it started
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def live(self) -> bool:
        return self in (JobPhase.QUEUED, *HOLDING_JOB_PHASES)


HOLDING_JOB_PHASES = (JobPhase.SCHEDULED, JobPhase.STARTING, JobPhase.RUNNING)


@dataclass(frozen=True)
class Preemption:
    """The last time a job was preempted: when, why, and the job it made room for."""

    at: datetime
    reason: PreemptReason
    beneficiary: str | None
    message: str


@dataclass(frozen=True)
class JobRecord:
    job: Job  # as submitted (QUEUED, no started_at)
    phase: JobPhase
    code: ErrorCode | None
    message: str | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    preemptions: int
    last_preemption: Preemption | None


@dataclass(frozen=True)
class JobQueueRecord:
    queue: JobQueue
    status: JobQueueStatus  # judged now against the stored policies and environments
    max_capacity: dict[str, int]  # its service environment's capacity limits


@dataclass(frozen=True)
class ShareCounts:
    """Live jobs of one share, counted in the store (not by a tick)."""

    queued: int = 0
    scheduled: int = 0
    starting: int = 0
    running: int = 0


@dataclass
class AppliedJobs:
    """What of a tick's job decisions still applied when it was written back."""

    scheduled: int = 0
    preempted: int = 0
    failed: int = 0
    stale: list[str] = field(default_factory=list)  # jobs that changed during the tick


@dataclass(frozen=True)
class TickInput:
    """A snapshot and the store's generation it was read at.

    See api.store.tick_io.SqlTickIO.apply_tick for what moves the generation on.
    """

    snapshot: Snapshot
    generation: int
    # Queued rows whose stored body no longer validates (an old row, a hand edit): failed
    # INFEASIBLE by the read instead of failing the tick (api.store.tick_io).
    rejected: int = 0


class SnapshotOvertaken(FailedPrecondition):
    """A tick's write-back refused: the store changed since its snapshot; re-plan."""


class LeaseLost(FailedPrecondition):
    """A leader's write refused: another replica took the lease at a later epoch."""


@dataclass(frozen=True)
class DecisionRows:
    """A tick's decisions on actions and pools as its write-back writes them: ids, placements
    already dumped, codes. Made where the tick was solved (the worker), so the writer decodes
    and dumps nothing per action."""

    # (environment, cluster, placement JSON) of each reusable pool started.
    environments_started: list[tuple[str, str, str]] = field(default_factory=list)
    # (action, cluster, placement JSON, environment); cluster and placement None: the action
    # joins the running pool of its environment.
    scheduled: list[tuple[str, str | None, str | None, str | None]] = field(default_factory=list)
    failed: list[tuple[str, ErrorCode, str]] = field(default_factory=list)  # action, code, message

    @classmethod
    def of(cls, result: TickResult) -> DecisionRows:
        scheduled: list[tuple[str, str | None, str | None, str | None]] = []
        for decision in result.scheduled:
            placed = decision.placement()
            if placed is None:
                scheduled.append((decision.action, None, None, decision.environment))
            else:
                row = (decision.action, placed.cluster, placed.model_dump_json(), None)
                scheduled.append(row)
        return cls(
            environments_started=[
                (start.environment, start.cluster, start.placement().model_dump_json())
                for start in result.environments_started
            ],
            scheduled=scheduled,
            failed=[(f.action, f.code, f.message) for f in result.failed],
        )


@dataclass(frozen=True)
class TickWriteBack:
    """What a tick's write-back stores: the result's summary (its time, the queues' usage, the
    quota part: models.result.result_summary), its decisions as rows, and the whole result as
    text (models.result.result_text), kept where other replicas read it."""

    summary: TickResult
    rows: DecisionRows
    text: str

    @classmethod
    def of(cls, result: TickResult) -> TickWriteBack:
        return cls(result_summary(result), DecisionRows.of(result), result_text(result))


@dataclass(frozen=True)
class AppliedTick:
    """What of a tick's decisions still applied when it was written back."""

    scheduled: int
    failed: int
    environments_started: int
    stale: list[str] = field(default_factory=list)  # actions that changed during the tick
    jobs: AppliedJobs = field(default_factory=AppliedJobs)  # the job queues' decisions
    number: int = 0  # the tick's number in the database (ticks any leader wrote back)


# -- leadership --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lease:
    """The lease as it stands after a replica's attempt to hold it."""

    holder: str | None
    epoch: int
    remaining_s: float  # until it runs out, on the database's clock (<= 0: run out)


@dataclass(frozen=True)
class TickViews:
    """What a tick shows readers beside its decisions, written back with them."""

    # Blocked strict_fifo heads' explanations, by queue name.
    head_explanations: dict[str, Explanation] = field(default_factory=dict)
    # Scheduled or running actions failed at their deadline before the tick, by queue.
    deadline_exceeded: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class LastTick:
    """The last tick any leader wrote back. Its result and views are stored only where
    another process may serve the same database (`Store.shared`)."""

    number: int  # ticks written back since the database began (0: none yet)
    epoch: int  # the epoch of the leader that wrote it
    finished_at: datetime | None
    result: TickResult | None
    views: TickViews = field(default_factory=TickViews)
    text: str | None = None  # `result` as it is stored (models.result.result_text)


# -- triggers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Firing:
    """One line of a trigger's history: a scheduled time and what became of it."""

    scheduled_for: datetime
    fired_at: datetime
    outcome: FiringOutcome
    run: str | None  # the run it submitted, if any
    missed: int  # scheduled times this line stands for that passed while the service was down
    message: str


@dataclass(frozen=True)
class TriggerRecord:
    trigger: Trigger
    created_at: datetime  # a fixed rate counts from here
    next_due: datetime | None  # None while paused
    history: list[Firing]  # newest first, at most models.triggers.HISTORY_KEPT


class TriggerStore(Protocol):
    """The triggers' part of the service's store."""

    def create_trigger(self, trigger: Trigger, now: datetime) -> TriggerRecord: ...
    def replace_trigger(self, trigger: Trigger, now: datetime) -> TriggerRecord: ...
    def get_trigger(self, name: str) -> TriggerRecord: ...
    def list_triggers(self) -> list[TriggerRecord]: ...
    def delete_trigger(self, name: str) -> None: ...
    def fire_triggers(
        self, now: datetime, grace: timedelta, *, epoch: int | None = None
    ) -> list[Firing]: ...


# -- the interface -----------------------------------------------------------------------------


class QuotaStore(Protocol):
    """The job queues' part of the service's store."""

    def put_scheduling_policy(self, policy: SchedulingPolicy) -> SchedulingPolicy: ...
    def get_scheduling_policy(self, name: str) -> SchedulingPolicy: ...
    def list_scheduling_policies(self) -> list[SchedulingPolicy]: ...
    def delete_scheduling_policy(self, name: str) -> None: ...

    def put_service_environment(self, environment: ServiceEnvironment) -> ServiceEnvironment: ...
    def get_service_environment(self, name: str) -> ServiceEnvironment: ...
    def list_service_environments(self) -> list[ServiceEnvironment]: ...
    def delete_service_environment(self, name: str) -> None: ...

    def create_job_queue(self, queue: JobQueue) -> JobQueueRecord: ...
    def update_job_queue(
        self, name: str, change: Callable[[JobQueue], JobQueue]
    ) -> JobQueueRecord: ...
    def get_job_queue(self, name: str) -> JobQueueRecord: ...
    def list_job_queues(self) -> list[JobQueueRecord]: ...
    def delete_job_queue(self, name: str) -> None: ...
    def share_counts(self, job_queue: str | None = None) -> dict[tuple[str, str], ShareCounts]: ...
    def preemption_totals(self) -> dict[str, int]: ...

    def submit_job(self, job: Job) -> JobRecord: ...
    def get_job(self, job_id: str) -> JobRecord: ...
    def list_jobs(
        self,
        *,
        job_queue: str | None = None,
        share: str | None = None,
        phase: JobPhase | None = None,
        listing: Listing = FIRST_PAGE,
    ) -> Page[JobRecord]: ...
    def cancel_job(self, job_id: str, now: datetime) -> JobRecord: ...
    def report_job(
        self,
        job_id: str,
        outcome: ReportedOutcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> JobRecord: ...


class TaskStore(Protocol):
    """The task templates' and run queues' part of the service's store."""

    def create_task(self, task: TaskTemplate) -> TaskTemplate: ...
    def get_task(self, name: str) -> TaskTemplate: ...
    def list_tasks(self) -> list[TaskTemplate]: ...
    def delete_task(self, name: str) -> None: ...
    def run_queue(self, run: str) -> str | None: ...


class Store(QuotaStore, TriggerStore, TaskStore, Protocol):
    """The service's only access to durable state."""

    def get_settings(self) -> Settings: ...
    def put_settings(self, settings: Settings) -> None: ...

    def create_queue(self, queue: Queue) -> QueueRecord: ...
    def update_queue(self, name: str, changes: dict[str, Any]) -> QueueRecord: ...
    def get_queue(self, name: str) -> QueueRecord: ...
    def list_queues(self) -> list[QueueRecord]: ...
    def set_draining(self, name: str, draining: bool) -> QueueRecord: ...
    def delete_queue(self, name: str) -> None: ...
    def queue_counts(self, queue: str | None = None) -> dict[str, QueueCounts]: ...
    def action_totals(self, bounds_s: tuple[float, ...]) -> dict[str, ActionTotals]: ...
    def prune_finished(
        self, now: datetime, retention: Retention, wait_bounds_s: tuple[float, ...]
    ) -> int: ...
    def prune_finished_jobs(self, now: datetime, retention: Retention) -> int: ...

    def put_cluster(self, cluster: Cluster) -> None: ...
    def get_cluster(self, name: str) -> Cluster: ...
    def list_clusters(self) -> list[Cluster]: ...
    def delete_cluster(self, name: str) -> None: ...

    def put_environment(
        self, environment: Environment, idle_timeout: timedelta | None = None
    ) -> EnvironmentRecord: ...
    def get_environment(self, name: str) -> EnvironmentRecord: ...
    def list_environments(self) -> list[EnvironmentRecord]: ...
    def stop_environment(self, name: str) -> EnvironmentRecord: ...
    def stop_idle_environments(self, now: datetime, *, epoch: int | None = None) -> list[str]: ...

    def submit(self, actions: list[Action], routing: Routing = NOT_ROUTED) -> None: ...
    def submit_together(self, submissions: list[Submission]) -> list[SluiceError | None]: ...
    def get_action(self, action_id: str) -> ActionRecord: ...
    def list_actions(
        self,
        *,
        queue: str | None = None,
        phase: Phase | None = None,
        cluster: str | None = None,
        run: str | None = None,
        listing: Listing = FIRST_PAGE,
    ) -> Page[ActionRecord]: ...
    def cancel_action(self, action_id: str, now: datetime) -> ActionRecord: ...
    def expire_deadlines(self, now: datetime, *, epoch: int | None = None) -> list[str]: ...
    def finished_runs(self) -> list[FinishedRun]: ...
    def move_actions(
        self,
        to: str,
        now: datetime,
        check: Callable[[set[str], Snapshot], None],
        *,
        ids: list[str] | None = None,
        source: str | None = None,
        where: Callable[[Action], bool] | None = None,
    ) -> list[ActionRecord]: ...
    def report(
        self,
        action_id: str,
        outcome: ReportedOutcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> ActionRecord: ...

    def read_snapshot(self, now: datetime) -> Snapshot: ...
    def read_tick_input(self, now: datetime) -> TickInput: ...
    def fail_unreadable(self, invalid: dict[str, str], now: datetime) -> int: ...
    def apply_tick(
        self,
        tick: TickResult | TickWriteBack,
        generation: int,
        *,
        epoch: int | None = None,
        views: TickViews | None = None,
    ) -> AppliedTick: ...

    @property
    def shared(self) -> bool: ...
    def hold_lease(self, holder: str, epoch: int | None, ttl_s: float) -> Lease: ...
    def release_lease(self, holder: str, epoch: int) -> None: ...
    def last_tick(self, after: int = -1) -> LastTick: ...
    def record_forecasts(self, number: int, forecasts: Mapping[str, StartForecast]) -> None: ...
    def tick_forecasts(self, number: int) -> dict[str, StartForecast] | None: ...

    def close(self) -> None: ...
