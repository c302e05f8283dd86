"""Why an action failed, why it waits, or where it runs, and what would let it run.

An explanation has three parts, as Kueue's "why pending" does: a machine-readable
kind for each reason (from ReasonKind below), the numbers behind it, and a sentence
with those numbers in it. Suggestions are complete fixes: with every change of one
suggestion applied to the snapshot, the whole tick re-run schedules the action (for a
failed one: no longer fails it, and runs it or says why it waits). solver.explain.replay
proves each one that way before it is offered; the tests re-run the tick to check.

Numbers are in solver units: cpu in millicores, memory and other resources in their
base unit (bytes), devices and GPUs as counts. Sentences print Kubernetes spellings.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from models.fields import Timestamp


class ExplanationState(StrEnum):
    FAILED = "failed"
    WAITING = "waiting"
    SCHEDULED = "scheduled"


class ReasonKind(StrEnum):
    """What keeps an action out; ordered by severity (the first is the hardest to lift)."""

    # The line itself: nothing about resources.
    DEPTH = "depth"  # the queue holds at most `limit` actions and this one is past it
    HEAD_OF_LINE = "head_of_line"  # behind a blocked head of a strict_fifo queue
    RUN_CONCURRENCY = "run_concurrency"  # `used` of `limit` runs active; this run is new
    ACTION_CONCURRENCY = "action_concurrency"  # `used` of `limit` actions in flight
    # Caps of the queue (across all its clusters).
    QUEUE_CAP = "queue_cap"  # a named resource cap (cpu, memory, ...): used + requested > limit
    DEVICE_CAP = "device_cap"  # a cap on one canonical device type (max_accelerators)
    UNTYPED_GPU_CAP = "untyped_gpu_cap"  # max_gpus, the cap on untyped NVIDIA GPU requests
    # Room on the clusters, one reason per (cluster, node pool).
    LOWER_PRIORITY = "lower_priority"  # room this action could use went to higher priority
    NODE_FIT = "node_fit"  # the pool has the room in total, but not on one node
    CLUSTER_ROOM = "cluster_room"  # the pool has not that much room left at full scale
    # Why an action can never run (failed INFEASIBLE).
    NO_CLUSTER = "no_cluster"  # the queue routes to no cluster
    NO_ACCELERATOR = "no_accelerator"  # no node pool of the cluster has the device
    SELECTOR = "selector"  # the node selector matches no pool's labels
    LARGER_THAN_NODE = "larger_than_node"  # a container is larger than the largest node
    LARGER_THAN_CLUSTER = "larger_than_cluster"  # the total is more than the cluster at full scale
    # Neither a limit nor room.
    EXPIRED = "expired"  # max_queued_time or deadline passed while queued
    FITS_NOW = "fits_now"  # nothing keeps it out now: the next tick can schedule it
    SOLVER_LIMIT = "solver_limit"  # the tick ran out of time before it proved room for it


class Reason(BaseModel):
    """One constraint, with the numbers it is about; unused fields stay None."""

    kind: ReasonKind = Field(description="What holds the action back.")
    message: str = Field(description="The reason in one line.")
    queue: str | None = Field(default=None, description="The queue the reason is about.")
    cluster: str | None = Field(default=None, description="The cluster the reason is about.")
    node_pool: str | None = Field(default=None, description="The node pool the reason is about.")
    container: str | None = Field(
        default=None, description="The container of the action the reason is about."
    )
    resource: str | None = Field(
        default=None,
        description='The resource: cpu, memory, a canonical device, or "gpu" (untyped).',
    )
    requested: int | None = Field(
        default=None,
        description="What the action asks for, in the resource's solver unit (cpu: millicores,"
        " memory: bytes, devices: count).",
    )
    used: int | None = Field(
        default=None, description="What is in use of the cap, limit or pool, in the same unit."
    )
    limit: int | None = Field(
        default=None,
        description="The cap, the limit, one node's room or the cluster at full scale, in the"
        " same unit.",
    )
    free: int | None = Field(
        default=None, description="Room left in the pool at full scale, in the same unit."
    )
    largest_free: int | None = Field(
        default=None, description="Room left on the emptiest node of the pool, in the same unit."
    )
    head: str | None = Field(
        default=None, description="The action at the head of a strict_fifo line."
    )
    since: Timestamp | None = Field(
        default=None, description="Since when that head blocks the line."
    )
    behind: int | None = Field(default=None, description="How many actions wait behind the head.")
    queues: list[str] = Field(
        default_factory=list, description="Higher-priority queues that took the room."
    )


class ChangeKind(StrEnum):
    RAISE_CAP = "raise_cap"  # queue, resource, value: the new cap
    RAISE_LIMIT = "raise_limit"  # queue, setting (action/run concurrency, depth), value
    SWITCH_POLICY = "switch_policy"  # queue, value: the scheduling policy
    ADD_NODES = "add_nodes"  # cluster, node_pool, value: the new max_nodes (full scale)
    ADD_POOL = "add_pool"  # cluster, node_pool (new name), like: "cluster/pool" to copy, value
    WAIT_FOR_FINISH = "wait_for_finish"  # queue, resource, amount that must finish
    ROUTE_TO_QUEUE = "route_to_queue"  # value: the queue to submit it to
    REDUCE_REQUEST = "reduce_request"  # container, resource, value: the new request
    CHANGE_DEVICE = "change_device"  # container, value: the canonical device to ask for
    CHANGE_SELECTOR = "change_selector"  # container, resource: label key, value (None: drop)


class Change(BaseModel):
    kind: ChangeKind = Field(description="What to change.")
    queue: str | None = Field(default=None, description="The queue to change.")
    cluster: str | None = Field(default=None, description="The cluster to change.")
    node_pool: str | None = Field(default=None, description="The node pool to change.")
    container: str | None = Field(
        default=None, description="The container of the action to change."
    )
    resource: str | None = Field(
        default=None, description='A resource, a device, "gpu", a label key, or a setting\'s name.'
    )
    value: int | str | None = Field(default=None, description="The value to set.")
    amount: int | None = Field(
        default=None,
        description="The increase (of a limit, of nodes), or how many running actions must"
        " finish (for wait_for_finish).",
    )
    like: str | None = Field(
        default=None, description='For add_pool: the "cluster/pool" whose nodes and labels to copy.'
    )
    actions: list[str] = Field(
        default_factory=list,
        description="For wait_for_finish: the running actions that must finish.",
    )


class Suggestion(BaseModel):
    """One complete fix: with all of its changes applied, the tick re-run schedules the
    action (or, for a failed action, no longer fails it)."""

    changes: list[Change] = Field(
        description="Every change of the fix; applied together they let the action in."
    )
    message: str = Field(description="The fix in one line.")
    also_runs: list[str] = Field(
        default_factory=list,
        description="Actions ahead of it in the line that the fix lets in too, in global order.",
    )


class Explanation(BaseModel):
    action: str = Field(description="The action explained.")
    queue: str = Field(description="Its queue.")
    state: ExplanationState = Field(
        description="Where the action is: waiting, scheduled or failed."
    )
    code: str = Field(
        description="The ErrorCode of a failure, the tick's wait reason, or `scheduled`."
    )
    message: str = Field(description="One line: the state and the main reason.")
    items: list[Reason] = Field(
        default_factory=list,
        description="The constraints that keep it out (with `minimal`, a smallest such set),"
        " hardest to lift first.",
    )
    suggestions: list[Suggestion] = Field(
        default_factory=list, description="Fixes proven by re-running the tick with them."
    )
    cluster: str | None = Field(default=None, description="Where a scheduled action runs.")
    as_of: Timestamp = Field(description="The time of the snapshot explained.")
    minimal: bool = Field(
        default=True, description="False when the model ran out of time shrinking `items`."
    )
    model_solves: int = Field(default=0, description="CP-SAT solves spent on this explanation.")
    unproven: list[Suggestion] = Field(
        default_factory=list,
        description="Candidate fixes whose re-run tick did not finish within the budget: not"
        " offered as fixes.",
    )
    ruled_out: list[str] = Field(
        default_factory=list,
        description="Kinds of change that cannot let it in without displacing work scheduled"
        " now, in words.",
    )
    replays: int = Field(default=0, description="Ticks re-run to prove the suggestions.")


__all__ = [
    "Change",
    "ChangeKind",
    "Explanation",
    "ExplanationState",
    "Reason",
    "ReasonKind",
    "Suggestion",
]
