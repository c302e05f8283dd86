"""Bodies of the jobs' API (api.routes.jobs): a submission and a job with its life.

A queued job's place in line and why it waits come from the last tick (`LastTick`);
its preemptions from the store.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, NonNegativeInt

from api.schemas.common import Body, Name, to_domain
from api.store.records import JobPhase, JobRecord
from models.errors import ErrorCode
from models.fields import Timestamp
from models.quota import MAX_PRIORITY, Job
from models.quota_result import (
    JobWaitReason,
    PreemptedJob,
    PreemptReason,
    QuotaTickResult,
    WaitingJob,
)


class JobSubmit(Body):
    """One SageMaker Training job for a share: `count` instances of one type."""

    id: Name | None = Field(default=None, description="made by the server when omitted")
    job_queue: str = Field(description="The job queue, by name.")
    share: str = Field(description="The quota share of that job queue, by name.")
    instance_type: str = Field(
        examples=["ml.g5.xlarge"], description="A SageMaker Training instance type."
    )
    count: int = Field(
        default=1, ge=1, description="How many instances of that type it needs at once."
    )
    priority: int = Field(default=0, ge=0, le=MAX_PRIORITY, description="higher runs first")

    def to_job(self, now: datetime) -> Job:
        data: dict[str, Any] = self.model_dump()
        data["id"] = self.id or f"job-{uuid.uuid4().hex[:20]}"
        data["submitted_at"] = now
        return to_domain(Job, data, ())


class PreemptionPublic(BaseModel):
    at: Timestamp = Field(description="When it was preempted.")
    reason: PreemptReason = Field(description="Why.")
    beneficiary: str | None = Field(description="the job it made room for")
    message: str = Field(description="The preemption in words.")


class JobPublic(BaseModel):
    id: str = Field(description="The job's id.")
    job_queue: str = Field(description="Its job queue.")
    share: str = Field(description="Its quota share.")
    instance_type: str = Field(description="The instance type it needs.")
    count: int = Field(description="How many instances it needs.")
    priority: int = Field(description="Higher runs first in its share.")
    state: JobPhase = Field(description="Where it is in its life.")
    submitted_at: Timestamp = Field(
        description="When it was accepted; its place in line is its arrival."
    )
    scheduled_at: Timestamp | None = Field(description="when it got its instances")
    started_at: Timestamp | None = Field(description="when an executor reported it started")
    finished_at: Timestamp | None = Field(description="When it succeeded, failed or was cancelled.")
    code: ErrorCode | None = Field(description="For a failed job: its error code.")
    message: str | None = Field(description="For a failed job: why, in words.")
    preemptions: NonNegativeInt = Field(description="How often it was preempted.")
    last_preemption: PreemptionPublic | None = Field(
        description="The latest preemption; null if never."
    )
    position: int | None = Field(description="for a queued job: its place in its share's line")
    waiting_reason: JobWaitReason | None = Field(description="as of the last tick")
    waiting_message: str | None = Field(description="Why it waits, in words.")

    @classmethod
    def of(cls, record: JobRecord, last_tick: LastTick) -> JobPublic:
        job = record.job
        queued = record.phase is JobPhase.QUEUED
        waiting = last_tick.waiting.get(job.id) if queued else None
        stopped = last_tick.preempted.get(job.id) if queued else None
        last = record.last_preemption
        return cls(
            id=job.id,
            job_queue=job.job_queue,
            share=job.share,
            instance_type=job.instance_type,
            count=job.count,
            priority=job.priority,
            state=record.phase,
            submitted_at=job.submitted_at,
            scheduled_at=record.scheduled_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            code=record.code,
            message=record.message,
            preemptions=record.preemptions,
            last_preemption=PreemptionPublic(
                at=last.at, reason=last.reason, beneficiary=last.beneficiary, message=last.message
            )
            if last
            else None,
            position=waiting.position if waiting else stopped.position if stopped else None,
            waiting_reason=waiting.reason if waiting else None,
            waiting_message=waiting.message if waiting else None,
        )


@dataclass(frozen=True)
class LastTick:
    """The last tick's word on jobs, by id: why each queued one waits, who was preempted."""

    waiting: dict[str, WaitingJob]
    preempted: dict[str, PreemptedJob]

    @classmethod
    def of(cls, result: QuotaTickResult | None) -> LastTick:
        if result is None:
            return cls({}, {})
        return cls({w.job: w for w in result.waiting}, {p.job: p for p in result.preempted})
