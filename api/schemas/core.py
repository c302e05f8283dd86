"""Request and response bodies of the HTTP API, kept apart from the domain models.

Requests take what people write (`"4Ti"`, `"H100:1"`, `"1h"`) and are turned
into domain models (models.snapshot) once, in `to_*` methods; responses are
built from store records and the last tick's metrics.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError

from api.errors import invalid_from_validation
from api.store.sqlite import ActionRecord, Outcome, Phase, QueueCounts, QueueRecord
from models.errors import ErrorCode
from models.explanation import Explanation
from models.fields import Duration, Timestamp
from models.quantity import format_quantity
from models.result import QueueMetrics, WaitingAction, WaitReason
from models.snapshot import (
    DEFAULT_POOL,
    DEFAULT_QUEUE,
    Action,
    Container,
    Environment,
    Placement,
    Queue,
    Scheduling,
)

M = TypeVar("M", bound=BaseModel)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN, examples=["research"])]
Quantities = Annotated[
    dict[str, str | int],
    Field(
        description="resource -> Kubernetes quantity", examples=[{"cpu": "512", "memory": "4Ti"}]
    ),
]
DeviceCounts = Annotated[
    dict[str, int],
    Field(description="device (H100, nvidia-t4, A100/1g.5gb) -> count", examples=[{"H100": 48}]),
]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _domain(model: type[M], data: dict[str, Any], where: tuple[str | int, ...]) -> M:
    """Validate `data` into a domain model; errors name the field under `where`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = [{**p, "loc": (*where, *p["loc"])} for p in error.errors()]
        raise invalid_from_validation(problems) from None


# -- queues ----------------------------------------------------------------------------------


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
        return _domain(Queue, self.model_dump(), ())


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
    head_explanation: Explanation | None = Field(
        default=None, description="why the blocked head waits (GET /queues/{name} only)"
    )

    @classmethod
    def of(
        cls,
        record: QueueRecord,
        counts: QueueCounts,
        metrics: QueueMetrics | None,
        as_of: datetime | None,
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
        )


# -- actions ---------------------------------------------------------------------------------


class ContainerIn(Body):
    name: str = "main"
    resources: Quantities = Field(default_factory=dict)
    gpu: str | int | None = Field(
        default=None, description='"H100:4", "T4" (typed) or 2 (untyped NVIDIA GPUs)'
    )
    node_selector: dict[str, str] = Field(default_factory=dict)


class ActionSubmit(Body):
    """One action to queue. Without an id the server makes one; without a queue it goes to
    the default queue."""

    id: Name | None = None
    run: str | None = Field(default=None, description="defaults to the action's own id")
    queue: str = DEFAULT_QUEUE
    containers: list[ContainerIn] = Field(default_factory=list)
    environment: str | None = Field(default=None, description="a reusable environment's name")
    max_queued_time: str | float | None = Field(default=None, examples=["1h"])
    deadline: str | float | None = Field(
        default=None, description="a time, or a duration from submission", examples=["6h"]
    )

    def to_action(self, now: datetime, where: tuple[str | int, ...] = ()) -> Action:
        data = self.model_dump(exclude_none=True)
        data["id"] = self.id or f"act-{uuid.uuid4().hex[:20]}"
        data["submitted_at"] = now
        return _domain(Action, data, where)


class ActionBatch(Body):
    """Actions accepted all together or not at all."""

    actions: list[ActionSubmit] = Field(min_length=1, max_length=10_000)


class BatchAccepted(BaseModel):
    ids: list[str]


class ExecutorReport(Body):
    """What an executor says happened to a scheduled action."""

    outcome: Outcome
    code: ErrorCode | None = Field(default=None, description="for failed: the failure's code")
    message: str | None = None


class ActionPublic(BaseModel):
    id: str
    run: str
    queue: str
    state: Phase
    submitted_at: Timestamp
    containers: list[Container]
    environment: str | None
    max_queued_time: Duration | None
    deadline: Timestamp | Duration | None
    placement: Placement | None
    code: ErrorCode | None
    message: str | None
    scheduled_at: Timestamp | None
    started_at: Timestamp | None
    finished_at: Timestamp | None
    waiting_reason: WaitReason | None = Field(
        description="for a queued action, as of the last tick"
    )
    waiting_resource: str | None
    waiting_message: str | None

    @classmethod
    def of(cls, record: ActionRecord, waiting: WaitingAction | None) -> ActionPublic:
        action = record.action
        waiting = waiting if record.phase is Phase.QUEUED else None
        return cls(
            id=action.id,
            run=action.run_id,
            queue=action.queue,
            state=record.phase,
            submitted_at=action.submitted_at,
            containers=action.containers,
            environment=action.environment,
            max_queued_time=action.max_queued_time,
            deadline=action.deadline,
            placement=record.placement,
            code=record.code,
            message=record.message,
            scheduled_at=record.scheduled_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            waiting_reason=waiting.reason if waiting else None,
            waiting_resource=waiting.resource if waiting else None,
            waiting_message=waiting.message if waiting else None,
        )


# -- environments ----------------------------------------------------------------------------


class EnvironmentIn(Body):
    """A reusable container pool: `replicas` containers of this size, charged once at start."""

    queue: str = DEFAULT_QUEUE
    replicas: int = Field(default=1, ge=1)
    resources: Quantities = Field(default_factory=dict)
    gpu: str | int | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)

    def to_environment(self, name: str) -> Environment:
        return _domain(Environment, {"name": name, **self.model_dump(exclude_none=True)}, ())
