"""The decided plan by name: placements, reasons, and usage next to each cap."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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

# Waiting actions whose places in line are counted together (a block-by-groups matrix each).
PLACE_BLOCK = 256


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
    no_room: dict[tuple, Refusal] = {}
    for action in problem.actions:
        i = action.index
        queue = problem.queues[action.queue].name
        if i in failures:
            failure = failures[i]
            result.failed.append(
                FailedAction(
                    action=action.id, queue=queue, code=failure.code, message=failure.message
                )
            )
        elif i in plan.admitted:
            placement = plan.admitted[i]
            env = problem.envs[action.env].name if action.env is not None else None
            result.scheduled.append(
                ScheduledAction(
                    action=action.id,
                    queue=queue,
                    run=action.run,
                    cluster=problem.cluster_names[placement.cluster] if placement else None,
                    containers=_containers(problem, action.items, placement, new_nodes)
                    if placement
                    else [],
                    environment=env,
                )
            )
        else:
            refusal = refusals[i]
            if refusal is NO_ROOM:
                # Waiting actions of one queue mostly repeat a few requests: the plan is final,
                # so one shape (its containers' names included: the message has them) gets
                # one answer.
                items = plan.items_to_place(action)
                shape = (action.queue, *((id(it.request), id(it.pools), it.name) for it in items))
                if shape not in no_room:
                    no_room[shape] = room_refusal(problem, action, plan)
                refusal = no_room[shape]
            result.waiting.append(
                WaitingAction(
                    action=action.id,
                    queue=queue,
                    reason=refusal.reason,
                    resource=refusal.resource,
                    message=refusal.message,
                )
            )
    for e, placement in sorted(plan.env_started.items()):
        started = problem.envs[e]
        result.environments_started.append(
            EnvironmentStart(
                environment=started.name,
                queue=problem.queues[started.queue].name,
                cluster=problem.cluster_names[placement.cluster],
                containers=_containers(problem, started.items, placement, new_nodes),
            )
        )
    result.queues = _metrics(problem, plan, failures, heads)
    place_in_line(problem, plan, result.waiting)
    return result


def place_in_line(problem: Problem, plan: Plan, waiting: list[WaitingAction]) -> None:
    """Fill in each of `waiting` (in global order) its place in line after this tick.

    An action ahead could take the capacity one needs when it waits in the same queue (its
    caps and concurrency) or could land in one of the same node pools. Actions are grouped
    by (queue, pools); which groups compete is one matrix product, and the count ahead is
    taken block by block of the line (counts so far times the block's rows of that matrix,
    plus the competition inside the block), so the cost is numpy's, not a loop per action."""
    infos = {action.id: action for action in problem.actions}
    group_of: dict[tuple[int, tuple[int, ...]], int] = {}
    pools_of: list[list[int]] = []
    queue_of: list[int] = []
    members: list[int] = []  # per waiting entry, its group
    for entry in waiting:
        action = infos[entry.action]
        items = plan.items_to_place(action)
        key = (action.queue, tuple(id(item.all_pools) for item in items))
        g = group_of.get(key)
        if g is None:
            g = group_of[key] = len(pools_of)
            pools_of.append(sorted({p for item in items for p in item.all_pools.tolist()}))
            queue_of.append(action.queue)
        members.append(g)
    # Floating point for BLAS (integer products take numpy's slow loop), exact all the same:
    # the products of 0/1 pool rows count at most the pools (single precision holds that),
    # the counts of waiting actions stay far below double precision's 2**53.
    uses = np.zeros((len(pools_of), len(problem.pools)), dtype=np.float32)
    for g, pools in enumerate(pools_of):
        uses[g, pools] = 1
    queues = np.array(queue_of, dtype=np.int64)
    competing = queues[:, None] == queues[None, :]
    for start in range(0, len(uses), PLACE_BLOCK):
        # Row by row of groups, so the products never take more than a block's memory.
        competing[start : start + PLACE_BLOCK] |= uses[start : start + PLACE_BLOCK] @ uses.T > 0
    groups = np.array(members, dtype=np.int64)
    ahead = np.zeros(len(groups))
    seen = np.zeros(len(pools_of))  # waiting entries so far, per group
    for start in range(0, len(groups), PLACE_BLOCK):
        block = groups[start : start + PLACE_BLOCK]
        rows = competing[block].astype(np.float64)
        inside = np.tril(rows[:, block], -1).sum(axis=1)
        ahead[start : start + len(block)] = rows @ seen + inside
        seen += np.bincount(block, minlength=len(seen))
    in_queue: dict[int, int] = {}
    for position, (entry, g) in enumerate(zip(waiting, members, strict=True), 1):
        queue = queue_of[g]
        in_queue[queue] = in_queue.get(queue, 0) + 1
        # Set in place: the entries are decode's own, made this tick.
        entry.queue_position = in_queue[queue]
        entry.global_position = position
        entry.ahead_competing = round(ahead[position - 1])


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


def _containers(
    problem: Problem,
    items: list[Item],
    placement: NodeAssignment,
    new_nodes: dict[tuple[int, int], int],
) -> list[PlacedContainer]:
    placed = []
    for item, (p, node) in zip(items, placement.spots, strict=True):
        fresh = (p, node) in new_nodes
        placed.append(
            PlacedContainer(
                name=item.name,
                node_pool=problem.pools[p].name,
                node=new_nodes.get((p, node), node),
                new_node=fresh,
            )
        )
    return placed


def _metrics(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    heads: dict[int, int],
) -> dict[str, QueueMetrics]:
    waiting = [0] * len(problem.queues)
    for action in problem.actions:
        if action.index not in failures and action.index not in plan.admitted:
            waiting[action.queue] += 1
    moved = {problem.actions[i].queue for i in plan.admitted}
    behind_head = [0] * len(problem.queues)
    for action in problem.actions:
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


def room_refusal(problem: Problem, action: ActionInfo, plan: Plan) -> Refusal:
    """No room now: lower priority when higher-priority work took room it could have had."""
    items = plan.items_to_place(action)
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
        devices = {
            device
            for c in clusters
            for p in item.pools[c]
            if (device := problem.pools[p].device) is not None
        }
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
    priority = queue.priority
    higher = {
        plan.pool_top[p][1]
        for c in clusters
        if all(problem.fits_base_room(item, c) for item in items)
        for item in items
        for p in item.pools[c]
        if p in plan.pool_top and plan.pool_top[p][0] > priority
    }
    if higher:
        return Refusal(
            WaitReason.LOWER_PRIORITY,
            f"room in clusters {names} went to higher-priority queues"
            f" {', '.join(sorted(higher))} this tick; needs {what}",
        )
    return Refusal(WaitReason.CLUSTER_ROOM, f"no room now in clusters {names} for {what}")
