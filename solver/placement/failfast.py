"""Fail fast: actions that can never run, and actions whose time in the queue is up.

Plain checks before any model: a request larger than a cap of an empty queue,
an accelerator no routed cluster has, a container larger than every matching
node, a total larger than every routed cluster at full scale. Each message
names the request and what the queue or the clusters offer.

The checks on a whole action judge its containers together, never one at a time: the
containers confined to some of a cluster's pools must fit those pools at full scale, and
its untyped GPU containers together must find GPU types whose caps take them (two
containers of `gpu: 2` and `gpu: 1` under a cap of `T4=2` on a T4-only cluster can never
run, though each one alone could).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import combinations

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

# Every union of an action's distinct pool sets is checked up to this many sets (2**6 - 1
# unions); past it, each set alone and all of them together.
MOST_POOL_SETS = 6
# Steps of the search for GPU types that take an action's untyped containers; an action that
# needs more is not failed (it waits, as before this check), and the count keeps it reproducible.
TYPE_SEARCH_STEPS = 10_000


@dataclass(frozen=True)
class Failure:
    code: ErrorCode
    message: str


def fail_fast(problem: Problem) -> dict[int, Failure]:
    """Failures by action index (global order)."""
    failures: dict[int, Failure] = {}
    env_failures: dict[int, Failure | None] = {}
    # Actions of one queue with the same containers share their list of items, and lists
    # of the same requests their request vectors (solver.placement.problem): what can run
    # once can run again, so each such shape is judged once.
    feasible: set[tuple[int, ...]] = set()
    lists: set[tuple[int, int]] = set()  # (queue, list of items) judged feasible
    lone = _LoneContainers(problem)
    for action in problem.actions:
        if action.unrepresentable is not None:
            failures[action.index] = Failure(ErrorCode.INFEASIBLE, action.unrepresentable)
            continue
        failure = None
        if action.deadline is not None or action.max_queued_time_s is not None:
            failure = _expired(problem, action)
        if failure is None and action.env is not None:
            if action.env not in env_failures:
                env = problem.envs[action.env]
                if env.running:
                    env_failures[action.env] = None
                elif env.unrepresentable is not None:
                    env_failures[action.env] = Failure(ErrorCode.INFEASIBLE, env.unrepresentable)
                else:
                    env_failures[action.env] = _infeasible(
                        problem, env.queue, env.items, env.demand, f"environment {env.name}", lone
                    )
            failure = env_failures[action.env]
        elif failure is None and (action.queue, id(action.items)) not in lists:
            shape = (action.queue, *(id(item.request) for item in action.items))
            if shape not in feasible:
                failure = _infeasible(
                    problem, action.queue, action.items, action.demand, f"action {action.id}", lone
                )
                if failure is None:
                    feasible.add(shape)
            if failure is None:
                lists.add((action.queue, id(action.items)))
        if failure is not None:
            failures[action.index] = failure
    return failures


class _LoneContainers:
    """Whether a container alone fits its pools of some cluster at full scale, in Python
    ints: a request and a pool set's room are each read out of numpy once, and the clusters
    tried in order until one holds it (the first, mostly)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        # By the id of a request vector and of a list of pools, each held in the value so
        # the id stays its own.
        self._requests: dict[int, tuple[np.ndarray, tuple[int, ...]]] = {}
        self._rooms: dict[int, tuple[list[int], tuple[int, ...]]] = {}

    def fit(self, item: Item, clusters: list[int]) -> bool:
        known = self._requests.get(id(item.request))
        if known is None:
            known = self._requests[id(item.request)] = (item.request, tuple(item.request.tolist()))
        request = known[1]
        for c in clusters:
            pools = item.pools.get(c)
            if pools and all(map(operator.le, request, self._room(pools))):
                return True
        return False

    def _room(self, pools: list[int]) -> tuple[int, ...]:
        known = self._rooms.get(id(pools))
        if known is None:
            room = tuple(self.problem.full_scale_room(tuple(pools)).tolist())
            known = self._rooms[id(pools)] = (pools, room)
        return known[1]


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
    problem: Problem,
    queue_index: int,
    items: list[Item],
    demand: ResourceVector,
    who: str,
    lone: _LoneContainers,
) -> Failure | None:
    queue = problem.queues[queue_index]
    breach = next(demand.over(EMPTY, queue.caps), None)
    if breach is not None:
        return Failure(ErrorCode.INFEASIBLE, f"{who} {over_cap_text(queue.name, *breach)}")
    if not problem.cluster_names:
        return None  # no fleet described yet: placement cannot be judged, so it waits
    if not queue.clusters:
        return Failure(ErrorCode.INFEASIBLE, f"{who}: queue {queue.name} routes to no cluster")
    if len(items) == 1:
        # Most actions: the container's pools already leave out the types capped below it.
        if lone.fit(items[0], queue.clusters):
            return None
    elif any(_cluster_holds(problem, c, items, queue, demand) for c in queue.clusters):
        return None
    reasons = []
    for c in queue.clusters:
        reason = _cluster_refuses(problem, c, items, queue, demand)
        if reason is None:  # pragma: no cover - _cluster_holds and this agree
            return None
        reasons.append(f"cluster {problem.cluster_names[c]}: {reason}")
    return Failure(ErrorCode.INFEASIBLE, f"{who} can never run: " + "; ".join(reasons))


def _cluster_holds(
    problem: Problem, cluster: int, items: list[Item], queue: QueueInfo, demand: ResourceVector
) -> bool:
    """Every container of several has a pool here, together they fit the cluster at full
    scale, and the queue's type caps can take their untyped GPUs."""
    if not all(item.pools.get(cluster) for item in items):
        return False
    return (
        short_of_room(problem, cluster, items) is None
        and untyped_type_caps_refuse(problem, cluster, items, queue, demand) is None
    )


@dataclass(frozen=True)
class ShortOfRoom:
    """Containers confined to some pools that need more than those pools have at full scale."""

    containers: list[str]
    pools: tuple[int, ...]
    total: np.ndarray
    capacity: np.ndarray
    whole: bool  # the confined containers are all of the action's


def short_of_room(problem: Problem, cluster: int, items: list[Item]) -> ShortOfRoom | None:
    """The first set of pools (all the action may use first, then fewer) whose confined
    containers need more than it has at full scale; None if there is none. Each container
    must have a pool in `cluster`."""
    if not items:
        return None
    confined: dict[tuple[int, ...], list[Item]] = {}
    for item in items:
        confined.setdefault(tuple(item.pools[cluster]), []).append(item)
    sets = list(confined)
    needs = {s: _summed(members) for s, members in confined.items()}
    unions: list[tuple[int, ...]] = [tuple(sorted({p for s in sets for p in s}))]
    if len(sets) > 1:
        sizes = range(len(sets) - 1, 0, -1) if len(sets) <= MOST_POOL_SETS else [1]
        unions += [
            tuple(sorted({p for s in chosen for p in s}))
            for size in sizes
            for chosen in combinations(sets, size)
        ]
    seen: set[tuple[int, ...]] = set()
    for pools in unions:
        if pools in seen:
            continue
        seen.add(pools)
        held = set(pools)
        inside = [s for s in sets if held.issuperset(s)]
        total = _summed_arrays([needs[s] for s in inside])
        capacity = problem.full_scale_room(pools)
        if (total > capacity).any():
            members = [item for s in inside for item in confined[s]]
            return ShortOfRoom(
                [item.name for item in members], pools, total, capacity, len(members) == len(items)
            )
    return None


def _summed(items: list[Item]) -> np.ndarray:
    return _summed_arrays([item.request for item in items])


def _summed_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    total = arrays[0].copy()
    for array in arrays[1:]:
        total += array
    return total


def untyped_type_caps_refuse(
    problem: Problem, cluster: int, items: list[Item], queue: QueueInfo, demand: ResourceVector
) -> dict[str, int] | None:
    """The queue's caps by GPU type when no choice of types for the action's untyped GPU
    containers in `cluster` stays within them (next to its typed requests); None when one
    does. Each container must have a pool in `cluster`."""
    wanted: list[tuple[int, list[str]]] = []
    for item in items:
        if not item.untyped:
            continue
        devices = sorted({str(problem.pools[p].device) for p in item.pools[cluster]})
        if any(device not in queue.caps for device in devices):
            continue  # an uncapped type takes it whatever the others do
        wanted.append((item.gpus, devices))
    if not wanted:
        return None
    wanted.sort(key=lambda entry: -entry[0])
    capped = sorted({device for _, devices in wanted for device in devices})
    left = {device: queue.caps[device] - demand.amount(device) for device in capped}
    failed: set[tuple[int, tuple[int, ...]]] = set()
    steps = 0

    def place(k: int) -> bool:
        nonlocal steps
        if k == len(wanted):
            return True
        state = (k, tuple(left[device] for device in capped))
        steps += 1
        if state in failed or steps > TYPE_SEARCH_STEPS:
            return state not in failed  # out of steps: not proven, so not failed
        gpus, devices = wanted[k]
        for device in devices:
            if left[device] >= gpus:
                left[device] -= gpus
                found = place(k + 1)
                left[device] += gpus
                if found:
                    return True
        failed.add(state)
        return False

    if place(0):
        return None
    return {device: queue.caps[device] for device in capped}


def _cluster_refuses(
    problem: Problem, cluster: int, items: list[Item], queue: QueueInfo, demand: ResourceVector
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
    lacking = short_of_room(problem, cluster, items)
    if lacking is not None:
        over = [
            f"{name} {format_quantity(name, int(lacking.total[d]))} >"
            f" {format_quantity(name, int(lacking.capacity[d]))}"
            for d, name in enumerate(problem.dims)
            if lacking.total[d] > lacking.capacity[d]
        ]
        if lacking.whole:
            return f"total request is more than the cluster has at full scale ({', '.join(over)})"
        pool_names = ", ".join(problem.pools[p].name for p in lacking.pools)
        return (
            f"containers {', '.join(lacking.containers)}, which only pools {pool_names} can take,"
            f" need more than those have at full scale ({', '.join(over)})"
        )
    type_caps = untyped_type_caps_refuse(problem, cluster, items, queue, demand)
    if type_caps is not None:
        return untyped_caps_text(items, queue.name, type_caps)
    return None


def untyped_caps_text(items: list[Item], queue: str, caps: dict[str, int]) -> str:
    """`untyped GPUs 2+1 of containers a, b: queue team caps every GPU type here below
    what they need together (T4 at 2)`."""
    untyped = [item for item in items if item.untyped]
    shown = ", ".join(f"{device} at {cap}" for device, cap in sorted(caps.items()))
    return (
        f"untyped GPUs {'+'.join(str(item.gpus) for item in untyped)} of containers"
        f" {', '.join(item.name for item in untyped)}: queue {queue} caps every GPU type here"
        f" below what they need together ({shown})"
    )
