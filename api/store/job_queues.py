"""Durable state of the quota-managed job queues: policies, environments, job queues, jobs.

`SqlJobQueues` is the part of `api.store.sql_store.SqlStore` that holds them: the
same file, connections and transactions as the capped queues, so a tick reads both
kinds of queue in one read transaction and writes both kinds of decisions in one
write transaction (api.store.tick_io, with the functions at the end of this module).
Configuration is stored as the JSON of the models in models.quota; a job's row holds
the submitted Job and its life beside it.

A job's life: QUEUED -> SCHEDULED (the tick gave it its instances) -> STARTING
(an executor reported it is starting the job's containers; optional) -> RUNNING
(an executor reported it started) -> SUCCEEDED | FAILED | CANCELLED. A
preempted job goes from SCHEDULED, STARTING or RUNNING back to QUEUED and keeps its
`seq` and `submitted_at`, so it is back in its share's line at its arrival
place; the row remembers how often and, for the last time, why and for whom.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from api.store.backends import Conn, DuplicateKey
from api.store.connection import (
    SqlDatabase,
    bump_generation,
    read_page,
    read_time,
    stored_time,
)
from api.store.records import (
    FIRST_PAGE,
    HOLDING_JOB_PHASES,
    AppliedJobs,
    JobPhase,
    JobQueueRecord,
    JobRecord,
    Listing,
    Page,
    Preemption,
    ReportedOutcome,
    ShareCounts,
)
from api.store.retention import retired_preemptions
from models.errors import (
    AlreadyExists,
    ErrorCode,
    FailedPrecondition,
    InvalidInput,
    NotFound,
)
from models.quota import (
    Job,
    JobQueue,
    JobState,
    QueueState,
    SchedulingPolicy,
    ServiceEnvironment,
    job_queue_statuses,
    require_valid_job_queues,
)
from models.quota_result import PreemptReason, QuotaTickResult

_HOLDING_SQL = f"({', '.join(repr(phase.value) for phase in HOLDING_JOB_PHASES)})"
_LIVE_SQL = f"('QUEUED', {_HOLDING_SQL[1:]}"

# the phases a job must be in for each report; `starting` is optional before `started`
_REPORTABLE_FROM: dict[ReportedOutcome, tuple[JobPhase, ...]] = {
    ReportedOutcome.STARTING: (JobPhase.SCHEDULED,),
    ReportedOutcome.STARTED: (JobPhase.SCHEDULED, JobPhase.STARTING),
    ReportedOutcome.SUCCEEDED: HOLDING_JOB_PHASES,
    ReportedOutcome.FAILED: HOLDING_JOB_PHASES,
}


def _relative(error: InvalidInput, prefix: str) -> InvalidInput:
    """An error about `job_queues.0.x` of a checked list, as one about the request's `x`."""
    field = (error.field or "").removeprefix(prefix) or None
    return InvalidInput(error.message.replace(prefix, ""), field=field)


_JOB_COLUMNS = (
    "body, phase, code, message, scheduled_at, started_at, finished_at, preemptions,"
    " preempted_at, preempt_reason, preempt_beneficiary, preempt_message"
)


def _job_record(row: Sequence[Any]) -> JobRecord:
    (body, phase, code, message, scheduled_at, started_at, finished_at, preemptions) = row[:8]
    preempted_at, reason, beneficiary, preempt_message = row[8:]
    at = read_time(preempted_at)
    return JobRecord(
        job=Job.model_validate_json(body),
        phase=JobPhase(phase),
        code=ErrorCode(code) if code else None,
        message=message,
        scheduled_at=read_time(scheduled_at),
        started_at=read_time(started_at),
        finished_at=read_time(finished_at),
        preemptions=preemptions,
        last_preemption=Preemption(at, PreemptReason(reason), beneficiary, preempt_message)
        if at is not None
        else None,
    )


_Named = TypeVar("_Named", SchedulingPolicy, ServiceEnvironment)

# what the store keeps by name: its table, and the field a missing one's error names
_NAMED: dict[type, tuple[str, str]] = {
    SchedulingPolicy: ("scheduling_policies", "scheduling_policy"),
    ServiceEnvironment: ("service_environments", "service_environment"),
}


def _named(conn: Conn, kind: type[_Named], name: str) -> _Named:
    table, key = _NAMED[kind]
    found = conn.execute(f"SELECT body FROM {table} WHERE name = ?", (name,)).fetchone()
    if found is None:
        raise NotFound(f"{key.replace('_', ' ')} {name!r} does not exist", field=key)
    return kind.model_validate_json(found[0])


def _all_named(conn: Conn, kind: type[_Named]) -> list[_Named]:
    rows = conn.execute(f"SELECT body FROM {_NAMED[kind][0]} ORDER BY name").fetchall()
    return [kind.model_validate_json(body) for (body,) in rows]


def _stored_job_queues(conn: Conn) -> list[JobQueue]:
    rows = conn.execute("SELECT body FROM job_queues ORDER BY seq").fetchall()
    return [JobQueue.model_validate_json(body) for (body,) in rows]


class SqlJobQueues(SqlDatabase):
    """Scheduling policies, service environments, job queues and jobs over one SQLite file."""

    # -- scheduling policies and service environments ------------------------------------------

    def put_scheduling_policy(self, policy: SchedulingPolicy) -> SchedulingPolicy:
        """Create or replace; a job queue using a policy without a quota share policy turns
        INVALID (it is reported, not refused: the policy is the admin's to change)."""
        return self._put_named(policy)

    def get_scheduling_policy(self, name: str) -> SchedulingPolicy:
        with self._read() as conn:
            return _named(conn, SchedulingPolicy, name)

    def list_scheduling_policies(self) -> list[SchedulingPolicy]:
        with self._read() as conn:
            return _all_named(conn, SchedulingPolicy)

    def put_service_environment(self, environment: ServiceEnvironment) -> ServiceEnvironment:
        """Create or replace. A lowered limit takes effect at the next tick (jobs above it
        become eligible for preemption); a removed instance type makes a job queue whose
        shares limit it INVALID."""
        return self._put_named(environment)

    def get_service_environment(self, name: str) -> ServiceEnvironment:
        with self._read() as conn:
            return _named(conn, ServiceEnvironment, name)

    def list_service_environments(self) -> list[ServiceEnvironment]:
        with self._read() as conn:
            return _all_named(conn, ServiceEnvironment)

    def delete_scheduling_policy(self, name: str) -> None:
        """Refused while a job queue uses the policy."""
        self._delete_named(SchedulingPolicy, name, "scheduling_policy")

    def delete_service_environment(self, name: str) -> None:
        """Refused while a job queue runs on the environment."""
        self._delete_named(ServiceEnvironment, name, "service_environment")

    def _delete_named(self, kind: type[_Named], name: str, used_as: str) -> None:
        table, key = _NAMED[kind]
        with self._write() as conn:
            _named(conn, kind, name)
            users = [
                queue.name for queue in _stored_job_queues(conn) if getattr(queue, used_as) == name
            ]
            if users:
                raise FailedPrecondition(
                    f"{key.replace('_', ' ')} {name} is in use by job queue"
                    f"{'s' if len(users) > 1 else ''} {', '.join(users)};"
                    " change or delete them first",
                    field="name",
                )
            conn.execute(f"DELETE FROM {table} WHERE name = ?", (name,))
            bump_generation(conn)

    def _put_named(self, item: _Named) -> _Named:
        """Create or replace a scheduling policy or service environment."""
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO {_NAMED[type(item)][0]} VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET body = excluded.body",
                (item.name, item.model_dump_json()),
            )
            bump_generation(conn)
        return item

    # -- job queues ------------------------------------------------------------------------------

    def _records(self, conn: Conn, names: Sequence[str] | None) -> list[JobQueueRecord]:
        policies = _all_named(conn, SchedulingPolicy)
        environments = _all_named(conn, ServiceEnvironment)
        queues = _stored_job_queues(conn)
        statuses = job_queue_statuses(policies, environments, queues)
        limits = {e.name: e.capacity_limits for e in environments}
        return [
            JobQueueRecord(queue, statuses[queue.name], limits[queue.service_environment])
            for queue in queues
            if names is None or queue.name in names
        ]

    def _check_queue(self, conn: Conn, queue: JobQueue) -> None:
        """Refuse what would make `queue` INVALID, naming the request's field."""
        policies = [_named(conn, SchedulingPolicy, queue.scheduling_policy)]
        environments = [_named(conn, ServiceEnvironment, queue.service_environment)]
        owner = conn.execute(
            "SELECT name FROM job_queues WHERE service_environment = ? AND name != ?"
            " ORDER BY seq LIMIT 1",
            (queue.service_environment, queue.name),
        ).fetchone()
        if owner is not None:
            raise InvalidInput(
                f"service_environment: service environment {queue.service_environment} is"
                f" already attached to job queue {owner[0]}; a quota-managed service"
                " environment serves one job queue",
                field="service_environment",
            )
        try:
            require_valid_job_queues(policies, environments, [queue])
        except InvalidInput as error:
            raise _relative(error, "job_queues.0.") from None

    def create_job_queue(self, queue: JobQueue) -> JobQueueRecord:
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM job_queues WHERE name = ?", (queue.name,)).fetchone():
                raise AlreadyExists(f"job queue {queue.name!r} already exists", field="name")
            self._check_queue(conn, queue)
            conn.execute(
                "INSERT INTO job_queues (name, service_environment, body) VALUES (?, ?, ?)",
                (queue.name, queue.service_environment, queue.model_dump_json()),
            )
            bump_generation(conn)
            return self._records(conn, [queue.name])[0]

    def update_job_queue(self, name: str, change: Callable[[JobQueue], JobQueue]) -> JobQueueRecord:
        """Apply `change` to the stored queue and store the result, in one transaction.

        A share that still has live jobs cannot be removed; limits may shrink (what a
        share holds above them becomes eligible for preemption at the next tick).
        """
        with self._write() as conn:
            row = conn.execute("SELECT body FROM job_queues WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound(f"job queue {name!r} does not exist", field="job_queue")
            changed = change(JobQueue.model_validate_json(row[0]))
            self._check_queue(conn, changed)
            kept = {share.name for share in changed.quota_shares}
            for (share,) in conn.execute(
                f"SELECT DISTINCT share FROM jobs WHERE job_queue = ? AND phase IN {_LIVE_SQL}"
                " ORDER BY share",
                (name,),
            ).fetchall():
                if share not in kept:
                    raise FailedPrecondition(
                        f"quota share {share} of job queue {name} still has live jobs;"
                        " cancel them or let them finish before removing it",
                        field="quota_shares",
                    )
            conn.execute(
                "UPDATE job_queues SET service_environment = ?, body = ? WHERE name = ?",
                (changed.service_environment, changed.model_dump_json(), name),
            )
            bump_generation(conn)
            return self._records(conn, [name])[0]

    def delete_job_queue(self, name: str) -> None:
        """Only a job queue without live jobs can go; its finished jobs stay readable."""
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM job_queues WHERE name = ?", (name,)).fetchone() is None:
                raise NotFound(f"job queue {name!r} does not exist", field="job_queue")
            (live,) = conn.execute(
                f"SELECT COUNT(*) FROM jobs WHERE job_queue = ? AND phase IN {_LIVE_SQL}", (name,)
            ).fetchone()
            if live:
                raise FailedPrecondition(
                    f"job queue {name} still has {live} live jobs; disable it and let them"
                    " finish (or cancel them) first",
                    field="name",
                )
            conn.execute("DELETE FROM job_queues WHERE name = ?", (name,))
            bump_generation(conn)

    def get_job_queue(self, name: str) -> JobQueueRecord:
        with self._read() as conn:
            found = self._records(conn, [name])
        if not found:
            raise NotFound(f"job queue {name!r} does not exist", field="job_queue")
        return found[0]

    def list_job_queues(self) -> list[JobQueueRecord]:
        with self._read() as conn:
            return self._records(conn, None)

    def share_counts(self, job_queue: str | None = None) -> dict[tuple[str, str], ShareCounts]:
        """Live jobs per (job queue, share)."""
        sql = f"SELECT job_queue, share, phase, COUNT(*) FROM jobs WHERE phase IN {_LIVE_SQL}"
        args: tuple[str, ...] = ()
        if job_queue is not None:
            sql += " AND job_queue = ?"
            args = (job_queue,)
        with self._read() as conn:
            rows = conn.execute(sql + " GROUP BY job_queue, share, phase", args).fetchall()
        counts: dict[tuple[str, str], dict[str, int]] = {}
        for queue, share, phase, count in rows:
            counts.setdefault((queue, share), {})[phase.lower()] = count
        return {key: ShareCounts(**value) for key, value in counts.items()}

    def preemption_totals(self) -> dict[str, int]:
        """Preemptions per job queue, over every job the store holds and every job retention
        pruned."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT job_queue, CAST(SUM(preemptions) AS INTEGER) FROM jobs GROUP BY job_queue"
            ).fetchall()
            totals = retired_preemptions(conn)
        for job_queue, preemptions in rows:
            totals[job_queue] = totals.get(job_queue, 0) + preemptions
        return totals

    # -- jobs ------------------------------------------------------------------------------------

    def submit_job(self, job: Job) -> JobRecord:
        """Store a QUEUED job durably; its place in its share's line is its arrival."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT body FROM job_queues WHERE name = ?", (job.job_queue,)
            ).fetchone()
            if row is None:
                raise NotFound(f"job queue {job.job_queue!r} does not exist", field="job_queue")
            queue = JobQueue.model_validate_json(row[0])
            if queue.share(job.share) is None:
                shares = ", ".join(s.name for s in queue.quota_shares)
                raise NotFound(
                    f"job queue {queue.name} has no quota share {job.share!r} ({shares})",
                    field="share",
                )
            if queue.state is QueueState.DISABLED:
                raise FailedPrecondition(
                    f"job queue {queue.name} is DISABLED: it runs what it holds and accepts"
                    " no new jobs",
                    field="job_queue",
                )
            try:
                conn.execute(
                    "INSERT INTO jobs (id, job_queue, share, phase, body, submitted_at)"
                    " VALUES (?, ?, ?, 'QUEUED', ?, ?)",
                    (
                        job.id,
                        job.job_queue,
                        job.share,
                        job.model_dump_json(exclude={"state", "started_at"}),
                        stored_time(job.submitted_at),
                    ),
                )
            except DuplicateKey:
                raise AlreadyExists(
                    f"job {job.id!r} already exists (ids must be unique)", field="id"
                ) from None
            return self._job(conn, job.id)

    @staticmethod
    def _job(conn: Conn, job_id: str) -> JobRecord:
        row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"job {job_id!r} does not exist", field="job")
        return _job_record(row)

    def get_job(self, job_id: str) -> JobRecord:
        with self._read() as conn:
            return self._job(conn, job_id)

    def list_jobs(
        self,
        *,
        job_queue: str | None = None,
        share: str | None = None,
        phase: JobPhase | None = None,
        listing: Listing = FIRST_PAGE,
    ) -> Page[JobRecord]:
        """A page of jobs in arrival order, filtered."""
        filters: list[tuple[str, object]] = [
            ("job_queue = ?", job_queue),
            ("share = ?", share),
            ("phase = ?", None if phase is None else phase.value),
        ]
        with self._read() as conn:
            rows, next_after = read_page(
                conn, f"SELECT seq, {_JOB_COLUMNS} FROM jobs", filters, listing
            )
        return Page([_job_record(row) for row in rows], next_after)

    def cancel_job(self, job_id: str, now: datetime) -> JobRecord:
        """A queued job leaves its line; a scheduled or running one frees its instances."""
        with self._write() as conn:
            record = self._job(conn, job_id)
            if not record.phase.live:
                raise FailedPrecondition(
                    f"job {job_id} already finished ({record.phase.value})", field="job"
                )
            conn.execute(
                "UPDATE jobs SET phase = 'CANCELLED', finished_at = ? WHERE id = ?",
                (stored_time(now), job_id),
            )
            return self._job(conn, job_id)

    def report_job(
        self,
        job_id: str,
        outcome: ReportedOutcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> JobRecord:
        """An executor's word on a job holding instances; finishing frees them.

        A job preempted since the executor started it is QUEUED again, so its report
        is refused with the preemption named: the executor must stop it.
        """
        with self._write() as conn:
            record = self._job(conn, job_id)
            allowed = _REPORTABLE_FROM[outcome]
            if record.phase not in allowed:
                preempted = record.last_preemption
                why = (
                    f" (preempted at {preempted.at.isoformat()}: {preempted.message})"
                    if record.phase is JobPhase.QUEUED and preempted
                    else ""
                )
                raise FailedPrecondition(
                    f"job {job_id} is {record.phase.value}{why}; only"
                    f" {' or '.join(p.value for p in allowed)} jobs can be reported"
                    f" {outcome.value}",
                    field="job",
                )
            if outcome is ReportedOutcome.STARTING:
                conn.execute("UPDATE jobs SET phase = 'STARTING' WHERE id = ?", (job_id,))
            elif outcome is ReportedOutcome.STARTED:
                conn.execute(
                    "UPDATE jobs SET phase = 'RUNNING', started_at = ? WHERE id = ?",
                    (stored_time(now), job_id),
                )
            else:
                failed = outcome is ReportedOutcome.FAILED
                conn.execute(
                    "UPDATE jobs SET phase = ?, code = ?, message = ?, finished_at = ?"
                    " WHERE id = ?",
                    (
                        JobPhase.FAILED.value if failed else JobPhase.SUCCEEDED.value,
                        code.value if failed and code else None,
                        (message or "the executor reported a failure") if failed else message,
                        stored_time(now),
                        job_id,
                    ),
                )
            return self._job(conn, job_id)


# -- the tick (api.store.tick_io calls these inside its transactions) --------------------------


def read_quota_snapshot(conn: Conn) -> dict[str, Any]:
    """The job queues' Snapshot fields, read inside the snapshot's read transaction.

    SCHEDULED, STARTING and RUNNING jobs hold their instances since they were scheduled
    (that is the model's started_at, from which work lost is counted).
    """
    rows = conn.execute(
        f"SELECT body, phase, scheduled_at FROM jobs WHERE phase IN {_LIVE_SQL} ORDER BY seq"
    ).fetchall()
    jobs = []
    for body, phase, scheduled_at in rows:
        job = Job.model_validate_json(body)
        if phase != JobPhase.QUEUED:
            job = job.model_copy(
                update={"state": JobState(phase), "started_at": read_time(scheduled_at)}
            )
        jobs.append(job)
    return {
        "scheduling_policies": _all_named(conn, SchedulingPolicy),
        "service_environments": _all_named(conn, ServiceEnvironment),
        "job_queues": _stored_job_queues(conn),
        "jobs": jobs,
    }


def apply_quota_decisions(conn: Conn, result: QuotaTickResult) -> AppliedJobs:
    """Write one tick's job decisions inside the tick's write transaction.

    Each applies only to a job still where the tick saw it: a job cancelled or
    finished while the tick solved stays so, and nothing is scheduled twice.
    """
    now = stored_time(result.now)
    applied = AppliedJobs()
    for stop in result.preempted:
        changed = conn.execute(
            "UPDATE jobs SET phase = 'QUEUED', scheduled_at = NULL, started_at = NULL,"
            " preemptions = preemptions + 1, preempted_at = ?, preempt_reason = ?,"
            f" preempt_beneficiary = ?, preempt_message = ? WHERE id = ? AND phase IN"
            f" {_HOLDING_SQL}",
            (now, stop.reason.value, stop.beneficiary, stop.message, stop.job),
        ).rowcount
        applied.preempted += changed
        if not changed:
            applied.stale.append(stop.job)
    for start in result.scheduled:
        changed = conn.execute(
            "UPDATE jobs SET phase = 'SCHEDULED', scheduled_at = ? WHERE id = ?"
            " AND phase = 'QUEUED'",
            (now, start.job),
        ).rowcount
        applied.scheduled += changed
        if not changed:
            applied.stale.append(start.job)
    for failure in result.failed:
        changed = conn.execute(
            "UPDATE jobs SET phase = 'FAILED', code = ?, message = ?, finished_at = ?"
            " WHERE id = ? AND phase = 'QUEUED'",
            (failure.code.value, failure.message, now, failure.job),
        ).rowcount
        applied.failed += changed
        if not changed:
            applied.stale.append(failure.job)
    return applied
