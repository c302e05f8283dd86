"""What one quota tick decides for the job queues: scheduled, preempted, waiting, failed, usage."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from models.errors import ErrorCode
from models.quota import JobQueueStatus, ShareStrategy
from models.solver_info import SolverInfo


class ScheduledJob(BaseModel):
    """A job given its instances this tick; it becomes SCHEDULED with started_at = now."""

    job: str = Field(description="The job's id.")
    job_queue: str = Field(description="Its job queue.")
    share: str = Field(description="Its quota share.")
    instance_type: str = Field(description="The instance type it holds.")
    count: int = Field(description="How many instances it holds.")


class PreemptReason(StrEnum):
    """Why a job that held capacity was stopped (it goes back to its share's line)."""

    RECLAIM = "reclaim"  # its share was borrowing, and a lender took its capacity back
    OVER_LIMIT = "over_limit"  # its share holds more than its (lowered) limit allows
    IN_SHARE = "in_share_priority"  # a higher-priority job of its own share took its place
    ENVIRONMENT_LIMIT = "environment_limit"  # the environment's maximum is below what runs


class PreemptedJob(BaseModel):
    job: str = Field(description="The job's id.")
    job_queue: str = Field(description="Its job queue.")
    share: str = Field(description="Its quota share.")
    instance_type: str = Field(description="The instance type it held.")
    count: int = Field(description="How many instances it gave back.")
    reason: PreemptReason = Field(description="Why it was stopped.")
    beneficiary: str | None = Field(
        description="The job it made room for; null when the room was owed to nobody."
    )
    message: str = Field(description="The preemption in words.")
    position: int = Field(description="Its place in its share's line after this tick (0: next).")


class JobWaitReason(StrEnum):
    """Why a queued job is not scheduled at this tick."""

    JOB_QUEUE_NOT_READY = "job_queue_not_ready"  # DISABLED, or INVALID (see the queue's reason)
    SHARE_LIMIT = "share_limit"  # the share's own limit is used and it does not borrow
    BORROW_LIMIT = "borrow_limit"  # the share would exceed its limit plus borrow limit
    NO_IDLE_CAPACITY = "no_idle_capacity"  # it would borrow, and nothing lendable is idle
    ENVIRONMENT_FULL = "environment_full"  # within the share's limit, but the environment is full
    SOLVER_LIMIT = "solver_limit"  # the time limit ran out before the job was decided


class WaitingJob(BaseModel):
    job: str
    job_queue: str
    share: str
    reason: JobWaitReason
    message: str
    position: int  # its place in its share's line (0 = next)


class FailedJob(BaseModel):
    job: str
    job_queue: str
    share: str
    code: ErrorCode
    message: str


class ShareUsage(BaseModel):
    """One share after the tick, per instance type: held, borrowed beyond its limit, lent."""

    name: str
    strategy: ShareStrategy
    capacity_limits: dict[str, int]
    borrow_limit: int | None
    in_share_preemption: bool
    usage: dict[str, int]
    borrowed: dict[str, int]
    lent: dict[str, int]
    line: list[str]  # queued job ids in the order they will be considered, preempted ones included


class JobQueueUsage(BaseModel):
    name: str
    status: JobQueueStatus
    service_environment: str
    max_capacity: dict[str, int]
    usage: dict[str, int]
    unassigned_used: dict[str, int]  # borrowed from environment capacity no share is given
    shares: dict[str, ShareUsage]


class QuotaTickResult(BaseModel):
    now: datetime
    scheduled: list[ScheduledJob] = Field(default_factory=list)
    preempted: list[PreemptedJob] = Field(default_factory=list)
    waiting: list[WaitingJob] = Field(default_factory=list)
    failed: list[FailedJob] = Field(default_factory=list)
    job_queues: dict[str, JobQueueUsage] = Field(default_factory=dict)
    solver: SolverInfo
