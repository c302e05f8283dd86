"""What one tick decides: scheduled (with a node for every container), failed, waiting, usage."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from models.errors import ErrorCode
from models.fields import Timestamp
from models.quota_result import QuotaTickResult
from models.resources import ResourceVector, caps_of
from models.snapshot import ContainerPlacement, Placement, Scheduling
from models.solver_info import SolverInfo, SolverStatus


class PlacedContainer(ContainerPlacement):
    """Where the tick put a container: a snapshot's container placement, and whether its node
    is new. A Placement of these is the running work the admission becomes."""

    new_node: bool = False  # the node is started by this placement (scale-up within max_nodes)


class ScheduledAction(BaseModel):
    action: str
    queue: str
    run: str
    cluster: str | None  # None when the action joins an environment's running pool
    containers: list[PlacedContainer] = Field(default_factory=list)
    environment: str | None = None

    def placement(self) -> Placement | None:
        """Where the action runs; None when it joins an environment's running pool."""
        if self.cluster is None:
            return None
        return Placement.model_construct(cluster=self.cluster, containers=list(self.containers))


class EnvironmentStart(BaseModel):
    """A reusable pool started this tick by the first of its actions."""

    environment: str
    queue: str
    cluster: str
    containers: list[PlacedContainer]

    def placement(self) -> Placement:
        return Placement.model_construct(cluster=self.cluster, containers=list(self.containers))


class FailedAction(BaseModel):
    action: str
    queue: str
    code: ErrorCode
    message: str


class WaitReason(StrEnum):
    """Why a feasible action is not scheduled at this tick, most specific first."""

    DEPTH = "depth"
    HEAD_OF_LINE = "blocked_behind_head"
    RUN_CONCURRENCY = "run_concurrency"
    ACTION_CONCURRENCY = "action_concurrency"
    QUEUE_CAP = "queue_cap"
    LOWER_PRIORITY = "lower_priority"
    CLUSTER_ROOM = "cluster_room"
    SOLVER_LIMIT = "solver_limit"


class WaitingAction(BaseModel):
    action: str
    queue: str
    reason: WaitReason
    resource: str | None = None  # the capped resource, for queue_cap
    message: str
    # Where it stands after the tick, among the actions still waiting (1 is the head).
    queue_position: int | None = None  # in its queue's line
    global_position: int | None = None  # in the global order (priority, then arrival)
    ahead_competing: int | None = None  # waiting ahead of it in its queue or for its pools


class QueueMetrics(BaseModel):
    """Usage next to each cap, with the names `Queue.details` uses.

    Quantities are integers in canonical units (cpu in millicores, memory in bytes); the API
    and the CLI spell them as people write them.
    """

    name: str
    pool: str
    priority: int
    scheduling: Scheduling
    in_flight_resources: dict[str, int]
    max_resources: dict[str, int]
    accelerator_charges: dict[str, int]
    max_gpus: int | None
    max_accelerators: dict[str, int]
    head_blocked: bool
    head_blocked_since: Timestamp | None = None
    head_action: str | None = None
    blocked_behind_head: int = 0
    running_actions: int
    action_concurrency: int | None
    active_runs: int
    run_concurrency: int | None
    depth_used: int
    depth: int | None
    waiting: int

    def held(self) -> ResourceVector:
        """What the queue holds, as one vector (see models.resources)."""
        return ResourceVector({**self.in_flight_resources, **self.accelerator_charges})

    def caps(self) -> ResourceVector:
        return caps_of(self.max_resources, self.max_accelerators, self.max_gpus)


class TickResult(BaseModel):
    now: datetime
    scheduled: list[ScheduledAction] = Field(default_factory=list)
    environments_started: list[EnvironmentStart] = Field(default_factory=list)
    failed: list[FailedAction] = Field(default_factory=list)
    waiting: list[WaitingAction] = Field(default_factory=list)
    queues: dict[str, QueueMetrics] = Field(default_factory=dict)
    quota: QuotaTickResult | None = None  # the quota-managed job queues, when there are any
    solver: SolverInfo


__all__ = [
    "EnvironmentStart",
    "FailedAction",
    "PlacedContainer",
    "QueueMetrics",
    "ScheduledAction",
    "SolverInfo",
    "SolverStatus",
    "TickResult",
    "WaitReason",
    "WaitingAction",
]
