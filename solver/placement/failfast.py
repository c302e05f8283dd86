"""Fail fast: actions that can never run, and actions whose time in the queue is up.

Plain checks before any model: a request larger than a cap of an empty queue,
an accelerator no routed cluster has, a container larger than every matching
node, a total larger than every routed cluster at full scale. Each message
names the request and what the queue or the clusters offer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.errors import ErrorCode
from models.quantity import format_quantity
from models.resources import EMPTY, ResourceKind, ResourceVector, kind_of
from solver.placement.problem import (
    GPU_DIM,
    UNBOUNDED,
    ActionInfo,
    Item,
    Problem,
    QueueInfo,
)


@dataclass(frozen=True)
class Failure:
    code: ErrorCode
    message: str


def fail_fast(problem: Problem) -> dict[int, Failure]:
    """Failures by action index (global order)."""
    failures: dict[int, Failure] = {}
    env_failures: dict[int, Failure | None] = {}
    for action in problem.actions:
        failure = _expired(problem, action)
        if failure is None and action.env is not None:
            if action.env not in env_failures:
                env = problem.envs[action.env]
                env_failures[action.env] = (
                    None
                    if env.running
                    else _infeasible(
                        problem, env.queue, env.items, env.demand, f"environment {env.name}"
                    )
                )
            failure = env_failures[action.env]
        elif failure is None:
            failure = _infeasible(
                problem, action.queue, action.items, action.demand, f"action {action.id}"
            )
        if failure is not None:
            failures[action.index] = failure
    return failures


def over_cap_text(queue: str, name: str, amount: int, cap: int) -> str:
    """`requests gpu=4 but queue team caps untyped GPUs at 2`: a request above a cap."""
    match kind_of(name):
        case ResourceKind.NAMED:
            return (
                f"requests {name}={format_quantity(name, amount)} but queue {queue}"
                f" caps {name} at {format_quantity(name, cap)}"
            )
        case ResourceKind.DEVICE:
            return f"requests {name}:{amount} but queue {queue} caps {name} at {cap}"
        case ResourceKind.UNTYPED_GPU:
            return f"requests gpu={amount} but queue {queue} caps untyped GPUs at {cap}"


def _expired(problem: Problem, action: ActionInfo) -> Failure | None:
    if action.deadline is not None and problem.now >= action.deadline:
        return Failure(
            ErrorCode.DEADLINE_EXCEEDED,
            f"action {action.id}: deadline {action.deadline.isoformat()} passed while queued",
        )
    if action.max_queued_time_s is not None:
        waited = (problem.now - action.submitted_at).total_seconds()
        if waited >= action.max_queued_time_s:  # like the deadline: at the boundary, time is up
            return Failure(
                ErrorCode.MAX_QUEUED_TIME_EXCEEDED,
                f"action {action.id}: queued {waited:.0f}s, longer than its max_queued_time"
                f" of {action.max_queued_time_s:.0f}s",
            )
    return None


def describe_item(item: Item, dims: list[str]) -> str:
    parts = [
        f"{name}={format_quantity(name, int(item.request[d]))}"
        for d, name in enumerate(dims)
        if d != GPU_DIM and item.request[d]
    ]
    if item.gpus:
        parts.append(f"{item.device}:{item.gpus}" if item.device else f"gpu={item.gpus}")
    return f"container {item.name} ({', '.join(parts) or 'no requests'})"


def _infeasible(
    problem: Problem, queue_index: int, items: list[Item], demand: ResourceVector, who: str
) -> Failure | None:
    queue = problem.queues[queue_index]
    breach = next(demand.over(EMPTY, queue.caps), None)
    if breach is not None:
        return Failure(ErrorCode.INFEASIBLE, f"{who} {over_cap_text(queue.name, *breach)}")
    if not problem.cluster_names:
        return None  # no fleet described yet: placement cannot be judged, so it waits
    if not queue.clusters:
        return Failure(ErrorCode.INFEASIBLE, f"{who}: queue {queue.name} routes to no cluster")
    if any(_cluster_holds(problem, c, items) for c in queue.clusters):
        return None
    reasons = []
    for c in queue.clusters:
        reason = _cluster_refuses(problem, c, items, queue)
        if reason is None:  # pragma: no cover - _cluster_holds and this agree
            return None
        reasons.append(f"cluster {problem.cluster_names[c]}: {reason}")
    return Failure(ErrorCode.INFEASIBLE, f"{who} can never run: " + "; ".join(reasons))


def _cluster_holds(problem: Problem, cluster: int, items: list[Item]) -> bool:
    """Every container has a pool here, and together they fit the cluster at full scale."""
    if not all(item.pools.get(cluster) for item in items):
        return False
    usable = tuple(sorted({p for item in items for p in item.pools[cluster]}))
    return bool((sum(item.request for item in items) <= problem.full_scale_room(usable)).all())


def _cluster_refuses(
    problem: Problem, cluster: int, items: list[Item], queue: QueueInfo
) -> str | None:
    pools = [problem.pools[p] for p in problem.pools_of_cluster[cluster]]
    for item in items:
        if item.pools.get(cluster):
            continue
        what = describe_item(item, problem.dims)
        if item.gpus:
            offered = sorted({p.device for p in pools if p.device})
            matching = [p for p in pools if (p.device == item.device if item.device else p.nvidia)]
            if not matching:
                wanted = item.device or "an NVIDIA GPU"
                return f"{what}: no node pool has {wanted} (offers {', '.join(offered) or 'none'})"
        else:
            matching = [p for p in pools if not p.gpus_per_node]
            if not matching:
                return f"{what}: no node pool without accelerators"
        labelled = [
            p for p in matching if all(p.labels.get(k) == v for k, v in item.selector.items())
        ]
        if not labelled:
            selector = ", ".join(f"{k}={v}" for k, v in item.selector.items())
            return f"{what}: node selector {selector} matches no pool's labels"
        if item.untyped:
            devices = {p.device for p in labelled if p.device is not None}
            capped = {
                device: queue.caps[device]
                for device in devices
                if queue.caps.get(device, item.gpus) < item.gpus
            }
            if len(capped) == len(devices):
                caps = ", ".join(f"{device} at {cap}" for device, cap in sorted(capped.items()))
                return f"{what}: queue {queue.name} caps every GPU type here below that ({caps})"
        largest = max(labelled, key=lambda p: tuple(np.minimum(p.room, UNBOUNDED)))
        short = [
            f"{name} {format_quantity(name, int(item.request[d]))} >"
            f" {format_quantity(name, int(largest.room[d]))}"
            if name != "gpu"
            else f"{item.gpus} GPUs > {int(largest.room[d])}"
            for d, name in enumerate(problem.dims)
            if item.request[d] > largest.room[d]
        ]
        return f"{what} is larger than any node (largest: pool {largest.name}, {', '.join(short)})"
    total = np.sum([item.request for item in items], axis=0)
    capacity = problem.full_scale_room(
        tuple(sorted({p for item in items for p in item.pools[cluster]}))
    )
    over = [
        f"{name} {format_quantity(name, int(total[d]))} > {format_quantity(name, int(capacity[d]))}"
        for d, name in enumerate(problem.dims)
        if total[d] > capacity[d]
    ]
    if over:
        return "total request is more than the cluster has at full scale (" + ", ".join(over) + ")"
    return None
