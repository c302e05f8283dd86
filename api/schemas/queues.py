"""Bodies of the capped queues' API (api.routes.queues): create, update, a queue and its usage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, NonNegativeInt

from api.schemas.common import Body, DeviceCounts, Name, Quantities, to_domain
from api.store.records import QueueCounts, QueueRecord
from models.explanation import Explanation
from models.fields import Timestamp
from models.quantity import format_quantity
from models.result import QueueMetrics
from models.snapshot import DEFAULT_POOL, Queue, Scheduling


class QueueCreate(Body):
    """A new queue; the keywords of the seed's `Queue.create`."""

    name: Name
    pool: str = DEFAULT_POOL
    run_concurrency: NonNegativeInt | None = None
    action_concurrency: NonNegativeInt | None = None
    depth: NonNegativeInt | None = Field(
        default=None, description="in flight plus waiting; beyond it RESOURCE_EXHAUSTED"
    )
    priority: int = 0
    max_resources: Quantities = Field(default_factory=dict)
    max_gpus: NonNegativeInt | None = Field(default=None, description="untyped NVIDIA GPUs")
    max_accelerators: DeviceCounts = Field(default_factory=dict)
    scheduling: Scheduling = Scheduling.GREEDY_CAPACITY
    clusters: list[str] | None = Field(default=None, description="omitted: every cluster")

    def to_queue(self) -> Queue:
        return to_domain(Queue, self.model_dump(), ())


class QueueUpdate(Body):
    """Fields to change. A map replaces the whole map (`{}` removes those caps); `null`
    clears a limit (`"max_gpus": null` is the seed's `clear_max_gpus=True`)."""

    pool: str | None = None
    run_concurrency: NonNegativeInt | None = None
    action_concurrency: NonNegativeInt | None = None
    depth: NonNegativeInt | None = None
    priority: int | None = None
    max_resources: Quantities | None = None
    max_gpus: NonNegativeInt | None = None
    max_accelerators: DeviceCounts | None = None
    scheduling: Scheduling | None = None
    clusters: list[str] | None = None

    def changes(self) -> dict[str, Any]:
        """Only the fields the caller sent, in the JSON spelling the store merges."""
        changes = self.model_dump(mode="json", exclude_unset=True)
        for mapping in ("max_resources", "max_accelerators"):
            if mapping in changes and changes[mapping] is None:
                changes[mapping] = {}
        for required in ("pool", "priority", "scheduling"):
            if required in changes and changes[required] is None:
                del changes[required]
        return changes


class QueuePublic(BaseModel):
    """A queue's settings with its usage next to each cap (the seed's `Queue.details`)."""

    name: str
    pool: str
    priority: int
    scheduling: Scheduling
    draining: bool
    clusters: list[str] | None
    run_concurrency: int | None
    action_concurrency: int | None
    depth: int | None
    max_resources: dict[str, str]
    max_gpus: int | None
    max_accelerators: dict[str, int]
    in_flight_resources: dict[str, str]
    accelerator_charges: dict[str, int]
    head_blocked: bool
    head_blocked_since: Timestamp | None
    head_action: str | None
    blocked_behind_head: int
    running_actions: int
    active_runs: int
    depth_used: int
    waiting: int
    as_of: Timestamp | None = Field(description="the tick the usage figures come from")
    deadline_exceeded: list[str] = Field(
        default_factory=list,
        description="actions the last tick failed DEADLINE_EXCEEDED while scheduled or running:"
        " their executors must stop them and report failed",
    )
    head_explanation: Explanation | None = Field(
        default=None,
        description="why the blocked head waits, as the last tick explained it"
        " (GET /queues/{name} and its watch stream only)",
    )

    @classmethod
    def of(
        cls,
        record: QueueRecord,
        counts: QueueCounts,
        metrics: QueueMetrics | None,
        as_of: datetime | None,
        deadline_exceeded: list[str],
    ) -> QueuePublic:
        """Settings and counts as stored now; usage as of the last tick."""
        queue = record.queue
        settings = queue.model_dump(mode="json")
        return cls(
            name=queue.name,
            pool=queue.pool,
            priority=queue.priority,
            scheduling=queue.scheduling,
            draining=record.draining,
            clusters=queue.clusters,
            run_concurrency=queue.run_concurrency,
            action_concurrency=queue.action_concurrency,
            depth=queue.depth,
            max_resources=settings["max_resources"],
            max_gpus=queue.max_gpus,
            max_accelerators=queue.max_accelerators,
            in_flight_resources=(
                {r: format_quantity(r, a) for r, a in metrics.in_flight_resources.items()}
                if metrics
                else {}
            ),
            accelerator_charges=metrics.accelerator_charges if metrics else {},
            head_blocked=queue.head_blocked_since is not None,
            head_blocked_since=queue.head_blocked_since,
            head_action=metrics.head_action if metrics and metrics.head_blocked else None,
            blocked_behind_head=metrics.blocked_behind_head if metrics else 0,
            running_actions=counts.scheduled + counts.running,
            active_runs=metrics.active_runs if metrics else 0,
            depth_used=counts.depth_used,
            waiting=counts.queued,
            as_of=as_of if metrics else None,
            deadline_exceeded=deadline_exceeded,
        )
