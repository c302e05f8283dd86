"""What one tick decides: scheduled (with a node for every container), failed, waiting, usage."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from models.errors import ErrorCode
from models.fields import Timestamp
from models.snapshot import Scheduling

UNTYPED_GPU = "gpu"
"""The key of untyped NVIDIA GPU requests in `accelerator_charges`."""


class PlacedContainer(BaseModel):
    name: str
    node_pool: str
    node: int
    new_node: bool = False  # the node is started by this placement (scale-up within max_nodes)


class ScheduledAction(BaseModel):
    action: str
    queue: str
    run: str
    cluster: str | None  # None when the action joins an environment's running pool
    containers: list[PlacedContainer] = Field(default_factory=list)
    environment: str | None = None


class EnvironmentStart(BaseModel):
    """A reusable pool started this tick by the first of its actions."""

    environment: str
    queue: str
    cluster: str
    containers: list[PlacedContainer]


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


class QueueMetrics(BaseModel):
    """Usage next to each cap, with the names `Queue.details` uses."""

    name: str
    pool: str
    priority: int
    scheduling: Scheduling
    in_flight_resources: dict[str, str]
    max_resources: dict[str, str]
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


class SolverStatus(StrEnum):
    """How the tick's answer was reached."""

    GREEDY_EXACT = "greedy_exact"  # first-fit placed everything the caps allowed: no model needed
    OPTIMAL = "optimal"  # the model decided every contested action
    LIMIT_REACHED = "limit_reached"  # time ran out; undecided actions keep the best plan found
    NOTHING_TO_DO = "nothing_to_do"


class SolverInfo(BaseModel):
    status: SolverStatus
    wall_time_s: float
    limit_hit: bool
    phases_s: dict[str, float] = Field(default_factory=dict)
    contested: int = 0  # actions best-fit could not place, each decided by the model or a bound
    model_solves: int = 0
    largest_model_variables: int = 0
    # Checks whose model was limited to the nodes near the action (the tick was too large to let
    # every admission move) and found no room: such a refusal is likely but not proven exact.
    unproven_refusals: int = 0


class TickResult(BaseModel):
    now: datetime
    scheduled: list[ScheduledAction] = Field(default_factory=list)
    environments_started: list[EnvironmentStart] = Field(default_factory=list)
    failed: list[FailedAction] = Field(default_factory=list)
    waiting: list[WaitingAction] = Field(default_factory=list)
    queues: dict[str, QueueMetrics] = Field(default_factory=dict)
    solver: SolverInfo
