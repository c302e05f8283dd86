"""Quota-managed job queues: AWS Batch quota shares over SageMaker Training capacity.

A job queue of type SAGEMAKER_TRAINING takes its capacity from one service
environment (a maximum count per instance type) and splits it into 1 to 20
quota shares. Each share is a virtual queue with 1 to 5 capacity limits and a
strategy for its idle capacity: RESERVE keeps it, LEND lends it, LEND_AND_BORROW
lends it and may also borrow idle capacity of others up to a borrow limit.

These are boundary models: a scenario file or an HTTP body validates into them,
and every limit of the seed is checked here with an error naming the field.
What can only be judged against other objects (the policy a queue names, the
environment it shares, the instance types that environment has) is reported by
`job_queue_statuses` as status INVALID with the reason, the way AWS reports a
job queue, and raised by `require_valid_job_queues` for a path that must refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from models.errors import InvalidInput
from models.fields import Timestamp, parse_count
from models.limits import MAX_BORROW_PERCENT, MAX_INSTANCES

MAX_SHARES_PER_JOB_QUEUE = 20
MIN_LIMITS_PER_SHARE = 1
MAX_LIMITS_PER_SHARE = 5
MAX_PRIORITY = 9999  # AWS Batch's range for a service job's schedulingPriority
UNLIMITED_BORROW = -1  # AWS's spelling of "no borrow limit"; stored as None
HEALTHY = "JobQueue Healthy"
NUM_INSTANCES = "NUM_INSTANCES"

_GPU_SIZES = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
# SageMaker's TrainingInstanceType list (API reference, 2025), family -> sizes. A name outside
# it is an error rather than a new type, as with accelerator devices (models.devices).
_TRAINING_FAMILIES: dict[str, tuple[str, ...]] = {
    "m4": ("xlarge", "2xlarge", "4xlarge", "10xlarge", "16xlarge"),
    "m5": ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge"),
    "m6i": ("large", *_GPU_SIZES, "32xlarge"),
    "c4": ("xlarge", "2xlarge", "4xlarge", "8xlarge"),
    "c5": ("xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge"),
    "c5n": ("xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge"),
    "c6i": (*_GPU_SIZES, "32xlarge"),
    "r5": ("large", *_GPU_SIZES),
    "r5d": ("large", *_GPU_SIZES),
    "t3": ("medium", "large", "xlarge", "2xlarge"),
    "p2": ("xlarge", "8xlarge", "16xlarge"),
    "p3": ("2xlarge", "8xlarge", "16xlarge"),
    "p3dn": ("24xlarge",),
    "p4d": ("24xlarge",),
    "p4de": ("24xlarge",),
    "p5": ("48xlarge",),
    "p5e": ("48xlarge",),
    "p5en": ("48xlarge",),
    "p6-b200": ("48xlarge",),
    "g4dn": ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
    "g5": (*_GPU_SIZES, "48xlarge"),
    "g6": (*_GPU_SIZES, "48xlarge"),
    "g6e": (*_GPU_SIZES, "48xlarge"),
    "trn1": ("2xlarge", "32xlarge"),
    "trn1n": ("32xlarge",),
    "trn2": ("48xlarge",),
}
SAGEMAKER_TRAINING_INSTANCE_TYPES: frozenset[str] = frozenset(
    f"ml.{family}.{size}" for family, sizes in _TRAINING_FAMILIES.items() for size in sizes
)


class _Strict(BaseModel):
    # Same settings as models.snapshot.Strict; not imported from there because snapshot
    # imports this module.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ServiceType(StrEnum):
    """The only job queue and service environment type that supports quota management."""

    SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"


class IdleResourceAssignment(StrEnum):
    FIFO = "FIFO"  # idle capacity goes to borrowing shares in arrival order (AWS: FIFO only)


class ShareStrategy(StrEnum):
    RESERVE = "RESERVE"  # idle capacity stays with the share
    LEND = "LEND"  # idle capacity may be used by other shares while it is idle
    LEND_AND_BORROW = "LEND_AND_BORROW"  # lends, and borrows up to the borrow limit

    @property
    def lends(self) -> bool:
        return self is not ShareStrategy.RESERVE

    @property
    def borrows(self) -> bool:
        return self is ShareStrategy.LEND_AND_BORROW


class JobState(StrEnum):
    QUEUED = "QUEUED"  # waiting in its share's line (AWS: RUNNABLE)
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"

    @property
    def holds_capacity(self) -> bool:
        return self is not JobState.QUEUED


class QueueState(StrEnum):
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"  # runs what it runs, starts nothing new


class QueueStatus(StrEnum):
    VALID = "VALID"
    INVALID = "INVALID"


def parse_instance_type(value: Any, field: str) -> str:
    """A SageMaker Training instance type (`ml.g5.xlarge`), in lower case."""
    text = str(value).strip()
    if text.upper() == NUM_INSTANCES:
        raise InvalidInput(
            f"{field}: a capacity limit by {NUM_INSTANCES} is not accepted; quota management"
            " limits capacity per instance type (for example ml.g5.xlarge: 3)",
            field=field,
        )
    name = text.lower()
    if name not in SAGEMAKER_TRAINING_INSTANCE_TYPES:
        families = ", ".join(sorted(_TRAINING_FAMILIES))
        raise InvalidInput(
            f"{field}: {text!r} is not an instance type SageMaker Training supports"
            f" (ml.<family>.<size>, families: {families})",
            field=field,
        )
    return name


def _parse_instance_type(value: Any, info: ValidationInfo) -> str:
    return parse_instance_type(value, info.field_name or "instance_type")


def _parse_capacity_limits(value: Any, info: ValidationInfo) -> dict[str, int]:
    field = info.field_name or "capacity_limits"
    if not isinstance(value, Mapping):
        raise InvalidInput(
            f"{field}: expected a mapping of instance type to maximum count"
            " (for example {ml.g5.xlarge: 3})",
            field=field,
        )
    limits: dict[str, int] = {}
    for name, count in value.items():
        where = f"{field}.{name}"
        instance_type = parse_instance_type(name, where)
        parsed = parse_count(count, where, MAX_INSTANCES, "instances")
        if instance_type in limits:
            raise InvalidInput(f"{where}: {instance_type} is limited twice", field=where)
        limits[instance_type] = parsed
    return limits


InstanceType = Annotated[str, BeforeValidator(_parse_instance_type)]
CapacityLimits = Annotated[dict[str, int], BeforeValidator(_parse_capacity_limits)]
"""Instance type to the most instances of it, e.g. {ml.g5.xlarge: 3}."""


class QuotaSharePolicy(_Strict):
    idle_resource_assignment_strategy: IdleResourceAssignment = Field(
        default=IdleResourceAssignment.FIFO,
        description="Who gets idle capacity: FIFO gives it to borrowing shares in arrival order"
        " (the only strategy, as in AWS Batch).",
    )


class SchedulingPolicy(_Strict):
    """A job queue's policy; only one with a quota_share_policy suits quota shares."""

    name: str = Field(min_length=1, description="The policy's name.")
    quota_share_policy: QuotaSharePolicy | None = Field(
        default=None,
        description="Present for a policy that serves quota shares; null: not quota-compatible.",
    )


class ServiceEnvironment(_Strict):
    """The capacity a quota-managed job queue runs on: a maximum count per instance type."""

    name: str = Field(min_length=1, description="The service environment's name.")
    type: ServiceType = Field(
        default=ServiceType.SAGEMAKER_TRAINING,
        description="The service it runs on (SAGEMAKER_TRAINING, the only one).",
    )
    capacity_limits: CapacityLimits = Field(
        description="Instance type -> the most instances of it, across every job queue using"
        " the environment."
    )

    @field_validator("capacity_limits")
    @classmethod
    def _some_capacity(cls, limits: dict[str, int]) -> dict[str, int]:
        if not limits:
            raise InvalidInput("give at least one instance type and its maximum")
        return limits


class QuotaShare(_Strict):
    """A virtual queue inside a job queue, with its own capacity and sharing strategy.

    borrow_limit is a percentage of each of the share's own capacity limits, as in
    AWS Batch: 100 lets a share with a limit of 2 ml.g5.xlarge borrow 2 more (4 in
    all); fractions round down. Omitted (or AWS's -1) means no limit beyond the
    environment. Only LEND_AND_BORROW shares borrow, so only they may set it.
    """

    name: str = Field(min_length=1, description="The share's name, unique in its job queue.")
    capacity_limits: CapacityLimits = Field(
        description="Instance type -> the most instances the share holds of its own (1 to 5 types)."
    )
    strategy: ShareStrategy = Field(
        description="What happens to its idle capacity: RESERVE keeps it, LEND lends it,"
        " LEND_AND_BORROW lends it and borrows others'."
    )
    borrow_limit: int | None = Field(
        default=None,
        ge=UNLIMITED_BORROW,
        le=MAX_BORROW_PERCENT,
        description="Percent of each own limit it may borrow on top (100: as much again);"
        " LEND_AND_BORROW only; null or -1: up to the environment.",
    )
    in_share_preemption: bool = Field(
        default=False,
        description="Whether a higher-priority job of the share may preempt a lower-priority"
        " one of the same share.",
    )

    @field_validator("capacity_limits")
    @classmethod
    def _limit_count(cls, limits: dict[str, int]) -> dict[str, int]:
        if not MIN_LIMITS_PER_SHARE <= len(limits) <= MAX_LIMITS_PER_SHARE:
            raise InvalidInput(
                f"a quota share has {MIN_LIMITS_PER_SHARE} to"
                f" {MAX_LIMITS_PER_SHARE} capacity limits, not {len(limits)}"
            )
        return limits

    @field_validator("borrow_limit")
    @classmethod
    def _unlimited(cls, limit: int | None) -> int | None:
        # AWS writes "no limit" as -1, which says nothing on a share that does not borrow.
        return None if limit == UNLIMITED_BORROW else limit

    @model_validator(mode="after")
    def _borrow_limit_only_when_borrowing(self) -> Self:
        if self.borrow_limit is not None and not self.strategy.borrows:
            raise InvalidInput(
                f"borrow_limit: quota share {self.name} has strategy {self.strategy}, which"
                f" does not borrow; only {ShareStrategy.LEND_AND_BORROW} shares take a borrow"
                " limit",
                field="borrow_limit",
            )
        return self

    def borrowable(self, instance_type: str, environment_max: int) -> int:
        """The most instances of `instance_type` this share may borrow on top of its limit."""
        if not self.strategy.borrows:
            return 0
        own = self.capacity_limits.get(instance_type, 0)
        if self.borrow_limit is None:
            return environment_max
        return own * self.borrow_limit // 100


class JobQueue(_Strict):
    """A SAGEMAKER_TRAINING job queue with a quota-share policy and 1 to 20 shares."""

    name: str = Field(min_length=1)
    type: ServiceType = ServiceType.SAGEMAKER_TRAINING
    state: QueueState = QueueState.ENABLED
    scheduling_policy: str = Field(min_length=1)
    service_environment: str = Field(min_length=1)
    quota_shares: list[QuotaShare]

    @field_validator("quota_shares")
    @classmethod
    def _share_count(cls, shares: list[QuotaShare]) -> list[QuotaShare]:
        if not 1 <= len(shares) <= MAX_SHARES_PER_JOB_QUEUE:
            raise InvalidInput(
                f"a job queue holds 1 to {MAX_SHARES_PER_JOB_QUEUE} quota shares, not {len(shares)}"
            )
        require_unique([s.name for s in shares], "quota share")
        return shares

    def share(self, name: str) -> QuotaShare | None:
        return next((s for s in self.quota_shares if s.name == name), None)


class Job(_Strict):
    """A SageMaker Training job submitted to a share: `count` instances of one type."""

    id: str = Field(min_length=1)
    job_queue: str = Field(min_length=1)
    share: str = Field(min_length=1)
    priority: int = Field(default=0, ge=0, le=MAX_PRIORITY)  # higher runs first
    instance_type: InstanceType
    count: int = Field(default=1, ge=1, le=MAX_INSTANCES)
    state: JobState = JobState.QUEUED
    submitted_at: Timestamp  # with the position in the list, the job's place in its line
    started_at: Timestamp | None = None  # when it was given capacity (entered SCHEDULED)

    @model_validator(mode="after")
    def _started_when_holding(self) -> Self:
        if self.state.holds_capacity and self.started_at is None:
            raise InvalidInput(f"job {self.id}: a {self.state} job needs started_at")
        if not self.state.holds_capacity and self.started_at is not None:
            raise InvalidInput(f"job {self.id}: a QUEUED job has no started_at")
        return self


class JobQueueStatus(BaseModel):
    state: QueueState
    status: QueueStatus
    reason: str

    @property
    def ready(self) -> bool:
        """Whether the queue starts new jobs."""
        return self.state is QueueState.ENABLED and self.status is QueueStatus.VALID


def require_unique(names: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"{what} {name!r} appears twice")
        seen.add(name)


def check_quota_references(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
    jobs: Sequence[Job],
) -> None:
    """Unique names, and every name a job queue or job gives refers to something that exists."""
    require_unique([p.name for p in policies], "scheduling policy")
    require_unique([e.name for e in environments], "service environment")
    require_unique([q.name for q in job_queues], "job queue")
    require_unique([j.id for j in jobs], "job")
    policy_names = {p.name for p in policies}
    environment_names = {e.name for e in environments}
    queues = {q.name: q for q in job_queues}
    for queue in job_queues:
        if queue.scheduling_policy not in policy_names:
            raise InvalidInput(
                f"job queue {queue.name}: unknown scheduling policy {queue.scheduling_policy!r}"
            )
        if queue.service_environment not in environment_names:
            raise InvalidInput(
                f"job queue {queue.name}: unknown service environment {queue.service_environment!r}"
            )
    for job in jobs:
        job_queue = queues.get(job.job_queue)
        if job_queue is None:
            raise InvalidInput(f"job {job.id}: unknown job queue {job.job_queue!r}")
        if job_queue.share(job.share) is None:
            raise InvalidInput(
                f"job {job.id}: job queue {job_queue.name} has no quota share {job.share!r}"
            )


def _queue_problems(
    index: int,
    queue: JobQueue,
    policies: Mapping[str, SchedulingPolicy],
    environments: Mapping[str, ServiceEnvironment],
    owners: Mapping[str, str],
) -> list[InvalidInput]:
    """What makes one job queue INVALID, each naming the field at fault."""
    where = f"job_queues.{index}"
    problems: list[InvalidInput] = []
    policy = policies[queue.scheduling_policy]
    if policy.quota_share_policy is None:
        problems.append(
            InvalidInput(
                f"{where}.scheduling_policy: scheduling policy {policy.name} has no"
                " quota_share_policy, so it cannot schedule quota shares",
                field=f"{where}.scheduling_policy",
            )
        )
    environment = environments[queue.service_environment]
    owner = owners[environment.name]
    if owner != queue.name:
        problems.append(
            InvalidInput(
                f"{where}.service_environment: service environment {environment.name} is"
                f" already attached to job queue {owner}; a quota-managed service environment"
                " serves one job queue",
                field=f"{where}.service_environment",
            )
        )
    for s, share in enumerate(queue.quota_shares):
        for instance_type in share.capacity_limits:
            if instance_type not in environment.capacity_limits:
                field = f"{where}.quota_shares.{s}.capacity_limits.{instance_type}"
                offered = ", ".join(sorted(environment.capacity_limits))
                problems.append(
                    InvalidInput(
                        f"{field}: quota share {share.name} limits {instance_type}, which"
                        f" service environment {environment.name} does not offer ({offered})",
                        field=field,
                    )
                )
    return problems


def _all_problems(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
) -> dict[str, list[InvalidInput]]:
    by_policy = {p.name: p for p in policies}
    by_environment = {e.name: e for e in environments}
    owners: dict[str, str] = {}
    for queue in job_queues:  # the first queue to name an environment keeps it
        owners.setdefault(queue.service_environment, queue.name)
    return {
        queue.name: _queue_problems(i, queue, by_policy, by_environment, owners)
        for i, queue in enumerate(job_queues)
    }


def job_queue_statuses(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
) -> dict[str, JobQueueStatus]:
    """Each job queue's state, status and reason; VALID with "JobQueue Healthy" when consistent.

    References must already be checked (check_quota_references).
    """
    statuses: dict[str, JobQueueStatus] = {}
    problems = _all_problems(policies, environments, job_queues)
    for queue in job_queues:
        found = problems[queue.name]
        statuses[queue.name] = JobQueueStatus(
            state=queue.state,
            status=QueueStatus.INVALID if found else QueueStatus.VALID,
            reason="; ".join(p.message for p in found) if found else HEALTHY,
        )
    return statuses


def require_valid_job_queues(
    policies: Sequence[SchedulingPolicy],
    environments: Sequence[ServiceEnvironment],
    job_queues: Sequence[JobQueue],
) -> None:
    """Raise the first reason a job queue would be INVALID (for a create or update to refuse)."""
    check_quota_references(policies, environments, job_queues, [])
    for found in _all_problems(policies, environments, job_queues).values():
        if found:
            raise found[0]


__all__ = [
    "HEALTHY",
    "MAX_LIMITS_PER_SHARE",
    "MAX_SHARES_PER_JOB_QUEUE",
    "SAGEMAKER_TRAINING_INSTANCE_TYPES",
    "IdleResourceAssignment",
    "Job",
    "JobQueue",
    "JobQueueStatus",
    "JobState",
    "QueueState",
    "QueueStatus",
    "QuotaShare",
    "QuotaSharePolicy",
    "SchedulingPolicy",
    "ServiceEnvironment",
    "ServiceType",
    "ShareStrategy",
    "check_quota_references",
    "job_queue_statuses",
    "parse_instance_type",
    "require_valid_job_queues",
]
