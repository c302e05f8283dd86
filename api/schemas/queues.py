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

    name: Name = Field(description="The queue's name, unique among queues.")
    pool: str = Field(
        default=DEFAULT_POOL,
        description="The pool of queues it belongs to, for `watch_pool` and listings.",
    )
    run_concurrency: NonNegativeInt | None = Field(
        default=None, description="The most runs of the queue active at once; null: no limit."
    )
    action_concurrency: NonNegativeInt | None = Field(
        default=None,
        description="The most of its actions scheduled or running at once; null: no limit.",
    )
    depth: NonNegativeInt | None = Field(
        default=None, description="in flight plus waiting; beyond it RESOURCE_EXHAUSTED"
    )
    priority: int = Field(
        default=0,
        description="Higher goes first where queues share capacity; it orders, it does not"
        " preempt.",
    )
    max_resources: Quantities = Field(default_factory=dict)
    max_gpus: NonNegativeInt | None = Field(default=None, description="untyped NVIDIA GPUs")
    max_accelerators: DeviceCounts = Field(default_factory=dict)
    scheduling: Scheduling = Field(
        default=Scheduling.GREEDY_CAPACITY,
        description="greedy_capacity lets what fits pass a blocked action; strict_fifo keeps"
        " arrival order.",
    )
    clusters: list[str] | None = Field(default=None, description="omitted: every cluster")

    def to_queue(self) -> Queue:
        return to_domain(Queue, self.model_dump(), ())


class QueueUpdate(Body):
    """Fields to change. A map replaces the whole map (`{}` removes those caps); `null`
    clears a limit (`"max_gpus": null` is the seed's `clear_max_gpus=True`)."""

    pool: str | None = Field(default=None, description="A new pool of queues.")
    run_concurrency: NonNegativeInt | None = Field(
        default=None, description="A new limit on active runs; null: no limit."
    )
    action_concurrency: NonNegativeInt | None = Field(
        default=None,
        description="A new limit on actions scheduled or running at once; null: no limit.",
    )
    depth: NonNegativeInt | None = Field(
        default=None, description="A new limit on in flight plus waiting; null: no limit."
    )
    priority: int | None = Field(default=None, description="A new priority (higher goes first).")
    max_resources: Quantities | None = Field(
        default=None,
        description="The new resource caps, replacing all of them; `{}` or null: none.",
    )
    max_gpus: NonNegativeInt | None = Field(
        default=None, description="A new cap on untyped NVIDIA GPUs; null: no cap."
    )
    max_accelerators: DeviceCounts | None = Field(
        default=None, description="The new device caps, replacing all of them; `{}` or null: none."
    )
    scheduling: Scheduling | None = Field(default=None, description="A new scheduling policy.")
    clusters: list[str] | None = Field(
        default=None, description="The clusters it may use; null: every cluster."
    )

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

    name: str = Field(description="The queue's name.")
    pool: str = Field(description="The pool of queues it belongs to.")
    priority: int = Field(description="Higher goes first where queues share capacity.")
    scheduling: Scheduling = Field(description="greedy_capacity or strict_fifo.")
    draining: bool = Field(
        description="True while it accepts nothing new (what it holds still runs)."
    )
    clusters: list[str] | None = Field(description="The clusters it may use; null: every cluster.")
    run_concurrency: int | None = Field(description="The most runs active at once; null: no limit.")
    action_concurrency: int | None = Field(
        description="The most actions scheduled or running at once; null: no limit."
    )
    depth: int | None = Field(
        description="The most actions in flight plus waiting; null: no limit."
    )
    max_resources: dict[str, str] = Field(
        description="Resource caps, resource -> Kubernetes quantity."
    )
    max_gpus: int | None = Field(description="The cap on untyped NVIDIA GPUs; null: none.")
    max_accelerators: dict[str, int] = Field(description="Device caps, canonical device -> count.")
    in_flight_resources: dict[str, str] = Field(
        description="What its scheduled and running work holds, resource -> Kubernetes quantity"
        " (last tick)."
    )
    accelerator_charges: dict[str, int] = Field(
        description="Devices its work holds, canonical device (`gpu` for untyped) -> count"
        " (last tick)."
    )
    head_blocked: bool = Field(
        description="True while the head of a strict_fifo line cannot be placed."
    )
    head_blocked_since: Timestamp | None = Field(
        description="Since when the head blocks the line; null when it does not."
    )
    head_action: str | None = Field(description="The blocked head's id (last tick).")
    blocked_behind_head: int = Field(
        description="Actions waiting behind the blocked head (last tick)."
    )
    running_actions: int = Field(description="Actions scheduled or running now.")
    active_runs: int = Field(description="Runs with work scheduled or running (last tick).")
    depth_used: int = Field(
        description="Actions counted against `depth` now: queued, scheduled and running."
    )
    waiting: int = Field(description="Actions queued now.")
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
