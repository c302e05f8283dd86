"""Builders for quota-share tests: the seed's configuration, shares, jobs, and a tick loop."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from fixtures import FIXTURES
from models.quota import (
    Job,
    JobQueue,
    JobState,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareStrategy,
)
from models.quota_result import QuotaTickResult
from models.scenario import load_scenario
from solver.quota.tick import next_jobs, quota_tick

SEED_FIXTURE = FIXTURES / "quota-shares-seed.yaml"
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
G5 = "ml.g5.xlarge"
P3 = "ml.p3.2xlarge"
QUEUE = "training"


def seed_data() -> dict[str, Any]:
    """The seed fixture as plain data, to be changed by a test and validated again."""
    data = yaml.safe_load(SEED_FIXTURE.read_text())
    assert isinstance(data, dict)
    return data


@dataclass
class World:
    """Everything quota_tick takes; `tick` decides, `advance` applies the result."""

    policies: list[SchedulingPolicy]
    environments: list[ServiceEnvironment]
    job_queues: list[JobQueue]
    jobs: list[Job] = field(default_factory=list)
    now: datetime = NOW

    def tick(self) -> QuotaTickResult:
        return quota_tick(self.policies, self.environments, self.job_queues, self.jobs, self.now)

    def advance(self, result: QuotaTickResult, minutes: float = 1) -> World:
        return replace(
            self, jobs=next_jobs(self.jobs, result), now=self.now + timedelta(minutes=minutes)
        )

    def add(self, *jobs: Job) -> World:
        return replace(self, jobs=[*self.jobs, *jobs])

    def share(self, name: str) -> QuotaShare:
        found = self.job_queues[0].share(name)
        assert found is not None
        return found


def world(
    shares: list[QuotaShare], maximum: dict[str, int] | None = None, jobs: list[Job] | None = None
) -> World:
    return World(
        policies=[SchedulingPolicy(name="quota-policy", quota_share_policy={})],
        environments=[ServiceEnvironment(name="sagemaker", capacity_limits=maximum or {G5: 3})],
        job_queues=[
            JobQueue(
                name=QUEUE,
                scheduling_policy="quota-policy",
                service_environment="sagemaker",
                quota_shares=shares,
            )
        ],
        jobs=jobs or [],
    )


def seed_world(*jobs: Job) -> World:
    """The seed's example: project-a LEND_AND_BORROW, project-b LEND, project-c RESERVE."""
    snapshot = load_scenario(SEED_FIXTURE)
    return World(
        snapshot.scheduling_policies,
        snapshot.service_environments,
        snapshot.job_queues,
        list(jobs),
        snapshot.now,
    )


def share(
    name: str,
    strategy: ShareStrategy | str,
    limits: dict[str, int] | None = None,
    **options: Any,
) -> QuotaShare:
    return QuotaShare(
        name=name, capacity_limits=limits or {G5: 1}, strategy=ShareStrategy(strategy), **options
    )


def job(
    job_id: str,
    share_name: str,
    *,
    arrived: float = 0,
    priority: int = 0,
    count: int = 1,
    ran: float | None = None,
    state: JobState | None = None,
    instance_type: str = G5,
) -> Job:
    """A job that arrived `arrived` minutes before NOW; with `ran`, it holds capacity since."""
    holding = ran is not None
    return Job(
        id=job_id,
        job_queue=QUEUE,
        share=share_name,
        instance_type=instance_type,
        count=count,
        priority=priority,
        state=state or (JobState.RUNNING if holding else JobState.QUEUED),
        submitted_at=NOW - timedelta(minutes=arrived),
        started_at=NOW - timedelta(minutes=ran) if ran is not None else None,
    )


def summary(result: QuotaTickResult) -> dict[str, Any]:
    """The decisions only, for exact assertions."""
    return {
        "scheduled": [s.job for s in result.scheduled],
        "preempted": {p.job: (p.reason.value, p.beneficiary) for p in result.preempted},
        "waiting": {w.job: w.reason.value for w in result.waiting},
        "failed": [f.job for f in result.failed],
    }
