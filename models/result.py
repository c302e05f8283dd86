"""What one tick decides: scheduled (with a node for every container), failed, waiting, usage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from models.construct import collections_deferred
from models.encoded import EncodedModels, encode
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


LINE_ENTRIES = 128
"""Entries of a long list per JSON line (`split_result`): one line's decode holds its
process's GIL for a few milliseconds (about 8 ms for 128 waiting actions on a loaded machine),
where the whole 10,000-action result held it for 70-700 ms, which a request then waited."""


class ResultPart(BaseModel):
    """One line of a split result: a run of its scheduled actions or of its waiting ones."""

    scheduled: list[ScheduledAction] = Field(default_factory=list)
    waiting: list[WaitingAction] = Field(default_factory=list)


def result_summary(result: TickResult) -> TickResult:
    """`result` without its lists of actions and pools (scheduled, started, failed, waiting):
    its time, the queues' usage, the quota part and the solver's figures, which is what a
    server shows of a tick beside each action's own entry."""
    return result.model_copy(
        update={"scheduled": [], "environments_started": [], "failed": [], "waiting": []}
    )


def encoded_waiting(result: TickResult) -> EncodedModels[WaitingAction]:
    """Each waiting action's entry as its JSON, by action id (models.encoded)."""
    return EncodedModels.of(WaitingAction, ((entry.action, entry) for entry in result.waiting))


def split_result(
    result: TickResult, waiting: EncodedModels[WaitingAction] | None = None
) -> tuple[TickResult, list[bytes]]:
    """`result` without its scheduled and waiting actions, and those as JSON lines (no
    newline inside one) of at most LINE_ENTRIES each, for a reader to decode a line at a time
    (`join_result`) and let other threads run between lines. `waiting`: the result's waiting
    actions encoded already (`encoded_waiting`), whose lines are then joined, not dumped."""
    rest = result.model_copy(update={"scheduled": [], "waiting": []})
    parts = [
        ResultPart(scheduled=result.scheduled[i : i + LINE_ENTRIES])
        .model_dump_json(exclude={"waiting"})
        .encode()
        for i in range(0, len(result.scheduled), LINE_ENTRIES)
    ]
    if waiting is not None and len(waiting) == len(result.waiting):
        entries = list(waiting.encoded.values())
    else:  # none given, or an id repeated (the mapping then holds fewer entries)
        entries = [encode(entry) for entry in result.waiting]
    # As ResultPart(waiting=...).model_dump_json(exclude={"scheduled"}) writes them.
    parts += [
        b'{"waiting":[' + b",".join(entries[i : i + LINE_ENTRIES]) + b"]}"
        for i in range(0, len(entries), LINE_ENTRIES)
    ]
    return rest, parts


def join_result(rest: TickResult, parts: Sequence[bytes | str]) -> TickResult:
    """The result `split_result` split, a line at a time; `rest` may hold entries already."""
    scheduled, waiting = list(rest.scheduled), list(rest.waiting)
    with collections_deferred():
        for line in parts:
            part = ResultPart.model_validate_json(line)
            scheduled += part.scheduled
            waiting += part.waiting
    return rest.model_copy(update={"scheduled": scheduled, "waiting": waiting})


def result_text(result: TickResult, waiting: EncodedModels[WaitingAction] | None = None) -> str:
    """`result` as the text of a split result's lines, the rest first: a whole result's JSON
    is such a text too (one line), so `read_result_text` reads both. `waiting`: as for
    `split_result`."""
    rest, parts = split_result(result, waiting)
    return "\n".join([rest.model_dump_json(), *(part.decode() for part in parts)])


def read_result_text(text: str) -> TickResult:
    first, *parts = text.split("\n")
    return join_result(TickResult.model_validate_json(first), parts)


__all__ = [
    "LINE_ENTRIES",
    "EnvironmentStart",
    "FailedAction",
    "PlacedContainer",
    "QueueMetrics",
    "ResultPart",
    "ScheduledAction",
    "SolverInfo",
    "SolverStatus",
    "TickResult",
    "WaitReason",
    "WaitingAction",
    "encoded_waiting",
    "join_result",
    "read_result_text",
    "result_summary",
    "result_text",
    "split_result",
]
