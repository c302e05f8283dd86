"""Bodies of the job queues' API (api.routes.job_queues): policies, environments, shares.

Requests carry the scenario file's fields and spellings; a job queue's shares are
models.quota.QuotaShare as they are, so every limit of the seed is checked where the
body is read and the error names the field (`quota_shares.1.borrow_limit`). Usage in
responses is as of the last tick, like the capped queues' usage; counts of jobs and
statuses are read from the store at request time.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.schemas.common import Body, Name, to_domain
from api.store.records import JobQueueRecord, ShareCounts
from models.fields import Timestamp
from models.quota import (
    JobQueue,
    QueueState,
    QueueStatus,
    QuotaShare,
    QuotaSharePolicy,
    SchedulingPolicy,
    ServiceEnvironment,
    ServiceType,
    ShareStrategy,
)
from models.quota_result import (
    JobQueueUsage,
    PreemptedJob,
    QuotaTickResult,
    ScheduledJob,
)

CapacityLimits = dict[str, int | str]


# -- scheduling policies and service environments --------------------------------------------


class SchedulingPolicyIn(Body):
    """A scheduling policy; only one with a quota share policy serves quota shares."""

    quota_share_policy: QuotaSharePolicy | None = Field(
        default=None,
        description="{idle_resource_assignment_strategy: FIFO}; omitted: not quota-compatible",
    )

    def to_policy(self, name: str) -> SchedulingPolicy:
        return to_domain(SchedulingPolicy, {"name": name, **self.model_dump()}, ())


class ServiceEnvironmentIn(Body):
    """The capacity a quota-managed job queue runs on: the most instances per type."""

    type: ServiceType = Field(
        default=ServiceType.SAGEMAKER_TRAINING,
        description="The service it runs on (SAGEMAKER_TRAINING, the only one).",
    )
    capacity_limits: CapacityLimits = Field(
        description="instance type -> most instances (NUM_INSTANCES is refused)",
        examples=[{"ml.g5.xlarge": 3}],
    )

    def to_environment(self, name: str) -> ServiceEnvironment:
        return to_domain(ServiceEnvironment, {"name": name, **self.model_dump()}, ())


# -- job queues and shares -------------------------------------------------------------------


class JobQueueCreate(Body):
    """A SAGEMAKER_TRAINING job queue with a quota-share policy and 1 to 20 quota shares."""

    name: Name = Field(description="The job queue's name.")
    type: ServiceType = Field(
        default=ServiceType.SAGEMAKER_TRAINING,
        description="The service its jobs run on (SAGEMAKER_TRAINING, the only one).",
    )
    state: QueueState = Field(
        default=QueueState.ENABLED,
        description="ENABLED starts jobs; DISABLED runs what it runs and starts nothing new.",
    )
    scheduling_policy: str = Field(
        description="A scheduling policy with a quota share policy, by name."
    )
    service_environment: str = Field(
        description="The service environment whose capacity it uses, by name."
    )
    quota_shares: list[QuotaShare] = Field(description="1 to 20, each with 1 to 5 limits")

    def to_job_queue(self) -> JobQueue:
        return to_domain(JobQueue, self.model_dump(), ())


class JobQueueUpdate(Body):
    """Fields to change; `quota_shares` replaces the whole list."""

    state: QueueState | None = Field(default=None, description="ENABLED or DISABLED.")
    scheduling_policy: str | None = Field(
        default=None, description="Another scheduling policy, by name."
    )
    service_environment: str | None = Field(
        default=None, description="Another service environment, by name."
    )
    quota_shares: list[QuotaShare] | None = Field(
        default=None, description="The new shares, replacing all of them (1 to 20)."
    )

    def apply(self, queue: JobQueue) -> JobQueue:
        changes = self.model_dump(exclude_none=True)
        return to_domain(JobQueue, {**queue.model_dump(), **changes}, ())


class QuotaShareIn(Body):
    """One quota share, put under its name (created or replaced)."""

    capacity_limits: CapacityLimits = Field(
        examples=[{"ml.g5.xlarge": 1}],
        description="Instance type -> the most instances the share holds of its own (1 to 5"
        " types).",
    )
    strategy: ShareStrategy = Field(
        description="RESERVE keeps its idle capacity, LEND lends it, LEND_AND_BORROW lends it"
        " and borrows others'."
    )
    borrow_limit: int | None = Field(
        default=None, description="percent of each own limit; only LEND_AND_BORROW; null: none"
    )
    in_share_preemption: bool = Field(
        default=False,
        description="Whether a higher-priority job of the share may preempt a lower-priority"
        " one of the same share.",
    )

    def to_share(self, name: str) -> QuotaShare:
        return to_domain(QuotaShare, {"name": name, **self.model_dump()}, ())


class QuotaShareUpdate(Body):
    """Share fields to change; a map replaces the map, `borrow_limit: null` lifts the limit."""

    capacity_limits: CapacityLimits | None = Field(
        default=None,
        description="New limits, replacing the share's map; a lowered one makes what it holds"
        " above it eligible for preemption.",
    )
    strategy: ShareStrategy | None = Field(default=None, description="A new strategy.")
    borrow_limit: int | None = Field(
        default=None, description="A new borrow limit in percent; null lifts it."
    )
    in_share_preemption: bool | None = Field(
        default=None, description="Whether jobs of the share may preempt each other by priority."
    )

    def apply(self, share: QuotaShare) -> QuotaShare:
        changes = self.model_dump(exclude_unset=True)
        for required in ("capacity_limits", "strategy", "in_share_preemption"):
            if changes.get(required, 0) is None:
                del changes[required]
        return to_domain(QuotaShare, {**share.model_dump(), **changes}, ())


def with_share(queue: JobQueue, share: QuotaShare) -> JobQueue:
    """`queue` with `share` replacing the one of its name, or added at the end."""
    shares = [share if s.name == share.name else s for s in queue.quota_shares]
    if queue.share(share.name) is None:
        shares.append(share)
    return to_domain(JobQueue, {**queue.model_dump(), "quota_shares": shares}, ())


class SharePublic(BaseModel):
    """A share's settings, its usage as of the last tick and its live jobs now."""

    name: str = Field(description="The share's name.")
    capacity_limits: dict[str, int] = Field(
        description="Instance type -> the most instances of its own."
    )
    strategy: ShareStrategy = Field(description="RESERVE, LEND or LEND_AND_BORROW.")
    borrow_limit: int | None = Field(
        description="Percent of each own limit it may borrow; null: no limit."
    )
    in_share_preemption: bool = Field(
        description="Whether its jobs may preempt each other by priority."
    )
    usage: dict[str, int] = Field(description="instances held, per type (last tick)")
    borrowed: dict[str, int] = Field(description="held beyond its own limit (last tick)")
    lent: dict[str, int] = Field(description="of its limit, in another share's use (last tick)")
    line: list[str] = Field(description="queued jobs in the order they will be considered")
    queued: int = Field(description="Its jobs waiting now.")
    scheduled: int = Field(description="Its jobs given instances and not yet starting, now.")
    starting: int = Field(description="jobs whose executor is starting their containers")
    running: int = Field(description="Its jobs running now.")


class JobQueuePublic(BaseModel):
    """A job queue: settings, state/status/reason, usage per share and the last tick's moves."""

    name: str = Field(description="The job queue's name.")
    type: ServiceType = Field(description="The service its jobs run on.")
    state: QueueState = Field(description="ENABLED or DISABLED.")
    status: QueueStatus = Field(description="VALID, or INVALID with `reason`.")
    reason: str = Field(description='"JobQueue Healthy", or why the queue is INVALID')
    scheduling_policy: str = Field(description="Its scheduling policy, by name.")
    service_environment: str = Field(description="Its service environment, by name.")
    max_capacity: dict[str, int] = Field(description="the service environment's limits (now)")
    usage: dict[str, int] = Field(description="Instances its jobs hold, per type (last tick).")
    unassigned_used: dict[str, int] = Field(
        description="Instances borrowed from the environment's capacity that no share is"
        " given, per type (last tick)."
    )
    shares: list[SharePublic] = Field(
        description="Each quota share: settings, usage, and its jobs now."
    )
    scheduled: list[ScheduledJob] = Field(description="started by the last tick")
    preempted: list[PreemptedJob] = Field(description="preempted by the last tick")
    as_of: Timestamp | None = Field(description="the tick the usage figures come from")

    @classmethod
    def of(
        cls,
        record: JobQueueRecord,
        counts: dict[tuple[str, str], ShareCounts],
        result: QuotaTickResult | None,
    ) -> JobQueuePublic:
        queue = record.queue
        usage = result.job_queues.get(queue.name) if result else None
        return cls(
            name=queue.name,
            type=queue.type,
            state=record.status.state,
            status=record.status.status,
            reason=record.status.reason,
            scheduling_policy=queue.scheduling_policy,
            service_environment=queue.service_environment,
            max_capacity=record.max_capacity,
            usage=usage.usage if usage else {},
            unassigned_used=usage.unassigned_used if usage else {},
            shares=[
                _share(share, usage, counts.get((queue.name, share.name)))
                for share in queue.quota_shares
            ],
            scheduled=[s for s in result.scheduled if s.job_queue == queue.name] if result else [],
            preempted=[p for p in result.preempted if p.job_queue == queue.name] if result else [],
            as_of=result.now if usage and result else None,
        )


def _share(
    share: QuotaShare, usage: JobQueueUsage | None, counts: ShareCounts | None
) -> SharePublic:
    ticked = usage.shares.get(share.name) if usage else None
    counts = counts or ShareCounts()
    return SharePublic(
        name=share.name,
        capacity_limits=share.capacity_limits,
        strategy=share.strategy,
        borrow_limit=share.borrow_limit,
        in_share_preemption=share.in_share_preemption,
        usage=ticked.usage if ticked else {},
        borrowed=ticked.borrowed if ticked else {},
        lent=ticked.lent if ticked else {},
        line=ticked.line if ticked else [],
        queued=counts.queued,
        scheduled=counts.scheduled,
        starting=counts.starting,
        running=counts.running,
    )
