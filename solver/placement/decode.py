"""The decided plan by name: placements, reasons, and usage next to each cap."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate, chain, pairwise

import numpy as np

from models.construct import trusted_models
from models.resources import UNTYPED_GPU, ResourceKind
from models.result import (
    EnvironmentStart,
    FailedAction,
    PlacedContainer,
    QueueMetrics,
    ScheduledAction,
    WaitingAction,
    WaitReason,
)
from solver.placement.best_fit import NO_ROOM
from solver.placement.failfast import Failure, describe_item
from solver.placement.plan import NodeAssignment, Plan, Refusal
from solver.placement.problem import ActionInfo, Item, Problem
from solver.placement.room import earlier_sharing, sharing_lists

_BUILDER = "the tick's decode"


@dataclass
class Decisions:
    """What the tick decided for the capped queues: the TickResult's fields of that part."""

    scheduled: list[ScheduledAction] = field(default_factory=list)
    environments_started: list[EnvironmentStart] = field(default_factory=list)
    failed: list[FailedAction] = field(default_factory=list)
    waiting: list[WaitingAction] = field(default_factory=list)
    queues: dict[str, QueueMetrics] = field(default_factory=dict)


def decode(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    refusals: dict[int, Refusal],
    heads: dict[int, int],
) -> Decisions:
    result = Decisions()
    new_nodes = _new_node_numbers(problem, plan)
    reasons = RoomReasons(problem, plan)
    waiting: list[tuple[ActionInfo, Refusal]] = []
    scheduled: list[ActionInfo] = []
    queue_names = [queue.name for queue in problem.queues]
    for action in problem.actions:
        i = action.index
        if i in failures:
            failure = failures[i]
            result.failed.append(
                FailedAction(
                    action=action.id,
                    queue=queue_names[action.queue],
                    code=failure.code,
                    message=failure.message,
                )
            )
        elif i in plan.admitted:
            scheduled.append(action)
        else:
            refusal = refusals[i]
            if refusal is NO_ROOM:
                refusal = reasons.refusal(action)
            waiting.append((action, refusal))
    result.scheduled = _scheduled(problem, plan, scheduled, new_nodes)
    waiting_actions = [action for action, _ in waiting]
    positions = place_in_line(problem, plan, waiting_actions)
    result.waiting = trusted_models(
        WaitingAction,
        {
            "action": [action.id for action in waiting_actions],
            "queue": [queue_names[action.queue] for action in waiting_actions],
            "reason": [refusal.reason for _, refusal in waiting],
            "resource": [refusal.resource for _, refusal in waiting],
            "message": [refusal.message for _, refusal in waiting],
            "queue_position": positions.in_queue,
            "global_position": positions.in_line,
            "ahead_competing": positions.ahead_competing,
        },
        _BUILDER,
    )
    started = sorted(plan.env_started.items())
    placed = _containers(problem, [(problem.envs[e].items, at) for e, at in started], new_nodes)
    for (e, placement), containers in zip(started, placed, strict=True):
        env = problem.envs[e]
        result.environments_started.append(
            EnvironmentStart(
                environment=env.name,
                queue=problem.queues[env.queue].name,
                cluster=problem.cluster_names[placement.cluster],
                containers=containers,
            )
        )
    result.queues = _metrics(problem, plan, failures, heads, waiting_actions)
    return result


def place_in_line(problem: Problem, plan: Plan, waiting: list[ActionInfo]) -> Positions:
    """Each of `waiting` (in global order) its place in line after this tick.

    An action ahead could take the capacity one needs when it waits in the same queue (its
    caps and concurrency) or could land in one of the same node pools. So the count ahead is
    those of its queue, plus those on pools it shares, less those that are both: which
    distinct sets of pools share a pool is listed once (D431), and the last two terms
    counted down the line and down each queue's part of it in one compiled pass each, every
    action adding itself to the sets its own shares with (D430)."""
    set_of: dict[tuple[int, ...], int] = {}
    groups: dict[tuple[int, ...], int] = {}  # the pools of each item -> their pool set
    # (queue, a list of items, shared by a queue's actions) -> (the list, its pool set)
    lists: dict[tuple[int, int], tuple[list[Item], int]] = {}
    sets = np.zeros(len(waiting), dtype=np.int64)
    queues = np.zeros(len(waiting), dtype=np.int64)
    for k, action in enumerate(waiting):
        items = plan.items_to_place(action)
        known = lists.get((action.queue, id(items)))
        if known is None:
            key = tuple(id(item.all_pools) for item in items)
            s = groups.get(key)
            if s is None:
                pools = tuple(sorted({p for item in items for p in item.all_pools.tolist()}))
                s = groups[key] = set_of.setdefault(pools, len(set_of))
            known = lists[(action.queue, id(items))] = (items, s)
        sets[k] = known[1]
        queues[k] = action.queue
    start, sharing = _sharing_lists(list(set_of), len(problem.pools))
    queue_position = np.zeros(len(waiting), dtype=np.int64)
    both = np.zeros(len(waiting), dtype=np.int64)
    by_queue = np.argsort(queues, kind="stable")  # each queue's waiting actions in order
    for members in np.split(by_queue, np.flatnonzero(np.diff(queues[by_queue])) + 1):
        queue_position[members] = np.arange(1, len(members) + 1)
        both[members] = earlier_sharing(sets[members], start, sharing)
    ahead = (queue_position - 1) + earlier_sharing(sets, start, sharing) - both
    # Whole columns to Python ints at once: a numpy scalar per waiting action costs more.
    return Positions(queue_position.tolist(), list(range(1, len(waiting) + 1)), ahead.tolist())


@dataclass(frozen=True)
class Positions:
    """Where each waiting action stands after the tick (1 is the head), as the result's
    columns."""

    in_queue: list[int]
    in_line: list[int]
    ahead_competing: list[int]


def _sharing_lists(sets: list[tuple[int, ...]], pools: int) -> tuple[np.ndarray, np.ndarray]:
    """The pool sets (numbered in order) each set shares a pool with, as
    solver.placement.room.earlier_sharing reads them: set s's are
    `sharing[start[s]:start[s + 1]]`. Worked out from each pool's sets (D430)."""
    lengths = np.array([len(s) for s in sets], dtype=np.int64)
    set_start = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(lengths, out=set_start[1:])
    set_pools = np.fromiter(chain.from_iterable(sets), np.int64, int(set_start[-1]))
    owner = np.repeat(np.arange(len(sets), dtype=np.int64), lengths)
    pool_start = np.zeros(pools + 1, dtype=np.int64)
    np.cumsum(np.bincount(set_pools, minlength=pools), out=pool_start[1:])
    pool_sets = owner[np.argsort(set_pools, kind="stable")]
    return sharing_lists(set_start, set_pools, pool_start, pool_sets)


def _new_node_numbers(problem: Problem, plan: Plan) -> dict[tuple[int, int], int]:
    """Nodes started this tick, numbered from each pool's current count in order of use."""
    numbers: dict[tuple[int, int], int] = {}
    placements: list[tuple[list[Item], NodeAssignment]] = []
    for i in sorted(plan.admitted):
        placement = plan.admitted[i]
        if placement is not None:
            placements.append((problem.actions[i].items, placement))
    for e, placement in sorted(plan.env_started.items()):
        placements.append((problem.envs[e].items, placement))
    next_free = {p: pool.nodes for p, pool in enumerate(problem.pools)}
    for _, placement in placements:
        for p, node in placement.spots:
            if node >= problem.pools[p].nodes and (p, node) not in numbers:
                numbers[(p, node)] = next_free[p]
                next_free[p] += 1
    return numbers


def _scheduled(
    problem: Problem,
    plan: Plan,
    admitted: list[ActionInfo],
    new_nodes: dict[tuple[int, int], int],
) -> list[ScheduledAction]:
    placements = [plan.admitted[action.index] for action in admitted]
    placed = iter(
        _containers(
            problem,
            [
                (action.items, placement)
                for action, placement in zip(admitted, placements, strict=True)
                if placement
            ],
            new_nodes,
        )
    )
    return trusted_models(
        ScheduledAction,
        {
            "action": [action.id for action in admitted],
            "queue": [problem.queues[action.queue].name for action in admitted],
            "run": [action.run for action in admitted],
            "cluster": [
                problem.cluster_names[placement.cluster] if placement else None
                for placement in placements
            ],
            # An action that joins a running pool has no containers of its own.
            "containers": [next(placed) if placement else [] for placement in placements],
            "environment": [
                problem.envs[action.env].name if action.env is not None else None
                for action in admitted
            ],
        },
        _BUILDER,
    )


def _containers(
    problem: Problem,
    placements: list[tuple[list[Item], NodeAssignment]],
    new_nodes: dict[tuple[int, int], int],
) -> list[list[PlacedContainer]]:
    """The containers of each placement on their nodes (a node started now by its number)."""
    spots = [
        (item, p, node)
        for items, placement in placements
        for item, (p, node) in zip(items, placement.spots, strict=True)
    ]
    built = trusted_models(
        PlacedContainer,
        {
            "name": [item.name for item, _, _ in spots],
            "node_pool": [problem.pools[p].name for _, p, _ in spots],
            "node": [new_nodes.get((p, node), node) for _, p, node in spots],
            "new_node": [(p, node) in new_nodes for _, p, node in spots],
        },
        _BUILDER,
    )
    bounds = accumulate((len(placement.spots) for _, placement in placements), initial=0)
    return [built[start:stop] for start, stop in pairwise(bounds)]


def _metrics(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    heads: dict[int, int],
    waiting_actions: list[ActionInfo],
) -> dict[str, QueueMetrics]:
    waiting = [0] * len(problem.queues)
    for action in waiting_actions:
        waiting[action.queue] += 1
    moved = {problem.actions[i].queue for i in plan.admitted}
    behind_head = [0] * len(problem.queues)
    # Only actions after the first head can be behind one (the line is in global order).
    for action in problem.actions[min(heads.values(), default=len(problem.actions)) :]:
        head = heads.get(action.queue)
        if head is not None and action.index > head and action.index not in failures:
            behind_head[action.queue] += 1
    metrics = {}
    for q, queue in enumerate(problem.queues):
        usage = plan.usage[q]
        head = heads.get(q) if queue.strict else None
        blocked = head is not None
        since = None
        behind = behind_head[q] if head is not None else 0
        if head is not None:
            # The line has been stuck since the last tick it moved.
            moved_now = q in moved or queue.head_blocked_since is None
            since = problem.now if moved_now else queue.head_blocked_since
        held, caps = usage.held, queue.caps
        named = sorted(held.of_kind(ResourceKind.NAMED).keys() | caps.of_kind(ResourceKind.NAMED))
        devices = dict(sorted(held.of_kind(ResourceKind.DEVICE).items()))
        metrics[queue.name] = QueueMetrics(
            name=queue.name,
            pool=queue.pool,
            priority=queue.priority,
            scheduling=queue.scheduling,
            in_flight_resources={r: held.amount(r) for r in named},
            max_resources=dict(sorted(caps.of_kind(ResourceKind.NAMED).items())),
            accelerator_charges={UNTYPED_GPU: held.amount(UNTYPED_GPU), **devices},
            max_gpus=caps.get(UNTYPED_GPU),
            max_accelerators=dict(sorted(caps.of_kind(ResourceKind.DEVICE).items())),
            head_blocked=blocked,
            head_blocked_since=since,
            head_action=problem.actions[head].id if blocked and head is not None else None,
            blocked_behind_head=behind,
            running_actions=queue.running + usage.admitted,
            action_concurrency=queue.action_concurrency,
            active_runs=len(usage.runs),
            run_concurrency=queue.run_concurrency,
            depth_used=queue.running + usage.admitted + waiting[q],
            depth=queue.depth,
            waiting=waiting[q],
        )
    return metrics


class RoomReasons:
    """Why actions found no room now, against a final plan: lower priority when
    higher-priority work took room they could have had. One answer per shape of request
    (a queue's waiting actions mostly repeat a few), and what depends only on a container's
    pools (the devices it could land on, the queues on top of its pools) once per pool set."""

    def __init__(self, problem: Problem, plan: Plan) -> None:
        self.problem = problem
        self.plan = plan
        self._by_shape: dict[tuple, Refusal] = {}
        # By the id of a pools mapping (held in the value, so the id stays its own).
        self._devices: dict[tuple, tuple[object, set[str]]] = {}
        self._higher: dict[tuple[int, int, int], tuple[object, set[str]]] = {}
        self._base_room: dict[tuple[int, int], tuple[object, object, bool]] = {}
        self._higher_of: dict[tuple, tuple[list[Item], set[str]]] = {}

    def refusal(self, action: ActionInfo) -> Refusal:
        items = self.plan.items_to_place(action)
        # Its containers' names are in the message, so they are part of the shape.
        shape = (action.queue, *((id(it.request), id(it.pools), it.name) for it in items))
        known = self._by_shape.get(shape)
        if known is None:
            known = self._by_shape[shape] = self._refusal(action, items)
        return known

    def _refusal(self, action: ActionInfo, items: list[Item]) -> Refusal:
        problem, plan = self.problem, self.plan
        if not problem.cluster_names:
            return Refusal(WaitReason.CLUSTER_ROOM, "no clusters are configured yet")
        clusters = plan.candidate_clusters(items, action.queue)
        names = ", ".join(problem.cluster_names[c] for c in clusters) or "none"
        what = "; ".join(describe_item(item, problem.dims) for item in items)
        queue = problem.queues[action.queue]
        usage = plan.usage[action.queue]
        for item in items:
            if not item.untyped:
                continue
            devices = self._landing_devices(item, clusters)
            full = {
                d: usage.held.amount(d)
                for d in devices
                if d in queue.caps and usage.held.amount(d) + item.gpus > queue.caps[d]
            }
            if devices and len(full) == len(devices):
                device = min(full)
                return Refusal(
                    WaitReason.QUEUE_CAP,
                    f"queue {queue.name}, {device}: {full[device]} of {queue.caps[device]}"
                    f" in use, and {item.name}'s gpu={item.gpus} could only land on capped types",
                    device,
                )
        higher = self._higher_queues(items, clusters, queue.priority)
        if higher:
            return Refusal(
                WaitReason.LOWER_PRIORITY,
                f"room in clusters {names} went to higher-priority queues"
                f" {', '.join(sorted(higher))} this tick; needs {what}",
            )
        return Refusal(WaitReason.CLUSTER_ROOM, f"no room now in clusters {names} for {what}")

    def _higher_queues(self, items: list[Item], clusters: list[int], priority: int) -> set[str]:
        """The queues above `priority` on top of the containers' pools in those of `clusters`
        where each container has a node with room next to running work alone: once per
        priority, clusters and the containers' request vectors and pools (another queue's
        list of the same requests asks the same)."""
        key = (priority, tuple(clusters), *((id(it.request), id(it.pools)) for it in items))
        known = self._higher_of.get(key)
        if known is None:
            higher = set().union(
                *(
                    self._on_top(item, c, priority)
                    for c in clusters
                    if all(self._fits_base_room(item, c) for item in items)
                    for item in items
                )
            )
            # The items held keep their request vectors and pools, so the ids stay theirs.
            known = self._higher_of[key] = (items, higher)
        return known[1]

    def _fits_base_room(self, item: Item, cluster: int) -> bool:
        """Problem.fits_base_room, once per request vector and list of pools (shared by the
        items of a shape, and held in the value so their ids stay theirs)."""
        pools = item.pools.get(cluster, ())
        key = (id(item.request), id(pools))
        known = self._base_room.get(key)
        if known is None:
            fits = self.problem.fits_base_room(item, cluster)
            known = self._base_room[key] = (item.request, pools, fits)
        return known[2]

    def _landing_devices(self, item: Item, clusters: list[int]) -> set[str]:
        """The devices of the container's pools in `clusters`."""
        key = (id(item.pools), *sorted(clusters))
        known = self._devices.get(key)
        if known is None:
            devices = {
                device
                for c in clusters
                for p in item.pools[c]
                if (device := self.problem.pools[p].device) is not None
            }
            known = self._devices[key] = (item.pools, devices)
        return known[1]

    def _on_top(self, item: Item, cluster: int, priority: int) -> set[str]:
        """The queues of higher priority than `priority` on top of the container's pools in
        `cluster`."""
        key = (id(item.pools), cluster, priority)
        known = self._higher.get(key)
        if known is None:
            top = self.plan.pool_top
            names = {top[p][1] for p in item.pools[cluster] if p in top and top[p][0] > priority}
            known = self._higher[key] = (item.pools, names)
        return known[1]
