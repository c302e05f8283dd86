"""A suggestion's changes made to the tick's compiled problem, for solver.placement.resume.

Compiling a changed snapshot of 10,000 queued actions costs about a third of a CPU second;
the changes a suggestion makes touch a few queues, pools or one action. So the tick's own
problem is copied with only those parts compiled again, each from the changed snapshot:
queue settings (caps, limits, policy), a pool's full scale, a pool copied into a cluster
(appended after every other pool, and the containers that may use it matched again), the
running work a wait takes out (its room and its queue's charge), the request of the
explained action or of its environment, the queue it is routed to. Pools, queues and
actions keep their indices, as resume needs, but for a routed action: it moves to its
place in the new queue's priority, and the line then ends at it (`Patched.target`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from models.explanation import Change, ChangeKind
from models.snapshot import Action, ActionState, Snapshot
from solver.placement.connected import joined, pool_components
from solver.placement.problem import (
    ActionInfo,
    Item,
    Problem,
    QueueInfo,
    clusters_room,
    compile_queues,
    compile_snapshot,
    match_pools_again,
    pool_scale,
)
from solver.placement.resume import TickState

QUEUE_SETTINGS = (ChangeKind.RAISE_CAP, ChangeKind.RAISE_LIMIT, ChangeKind.SWITCH_POLICY)
REQUEST_CHANGES = (ChangeKind.REDUCE_REQUEST, ChangeKind.CHANGE_DEVICE, ChangeKind.CHANGE_SELECTOR)


@dataclass
class Patched:
    problem: Problem
    queues: set[int]  # queues whose settings or running work changed
    clusters: set[int]  # clusters with room added or freed
    pools: set[int]  # the pools of `clusters` with room added or freed
    envs: set[int]  # environments whose request changed
    absent: frozenset[int]  # pending actions the change takes out of the line
    actions: set[int]  # pending actions compiled again
    target: int  # the explained action's position in the changed line
    arrived: frozenset[int] = frozenset()  # where a routed action moved to (resume)
    hurts: bool = False  # work finishes: its run may end, and with it a slot (resume)
    # Pools by component (solver.placement.connected) with the containers compiled again
    # or matched again to a pool added.
    components: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # The tick let every placed unit move anywhere (TickState.every_unit_moves): room reaches
    # work through chains of units, whatever clusters its queue is routed to.
    anywhere: bool = False


def patch(
    state: TickState,
    snapshot: Snapshot,
    changed: Snapshot,
    action_id: str,
    changes: list[Change],
    ahead_only: bool = False,
) -> Patched:
    """`state.problem` as `compile_snapshot(changed)` would compile it (`changed`: `snapshot`
    with `changes` applied), with the same indices; with `ahead_only`, the actions behind
    the explained one left as they were (a proof decides nothing behind it)."""
    base = state.problem
    queues = list(base.queues)
    pools = list(base.pools)
    pools_of_cluster = list(base.pools_of_cluster)
    actions = list(base.actions)
    envs = list(base.envs)
    queue_of = {q.name: q.index for q in base.queues}
    index = base.positions()
    target = base.actions[index[action_id]]
    found = Patched(base, set(), set(), set(), set(), frozenset(), set(), target.index)
    # Settings are read off the changed snapshot: a queue's as compiled alone, a pool's full
    # scale off its spec. Only a pool added is compiled with the fleet, and takes running work
    # from there (an environment placed on it): a few ms.
    added = any(c.kind is ChangeKind.ADD_POOL for c in changes)
    grows = added or any(c.kind is ChangeKind.ADD_NODES for c in changes)
    settings = compile_snapshot(_without_actions(changed, changed.environments)) if added else None
    changed_queues = (
        compile_queues(changed) if any(c.kind in QUEUE_SETTINGS for c in changes) else []
    )
    pool_of = {(p.cluster, p.name): p.index for p in base.pools}
    cluster_of = {name: c for c, name in enumerate(base.cluster_names)}
    recompile: set[str] = set()
    rematch: set[int] = set()  # queues whose containers may use an added pool
    for change in changes:
        kind = change.kind
        if kind in QUEUE_SETTINGS:
            q = queue_of[change.queue] if change.queue else target.queue
            queues[q] = _settings(queues[q], changed_queues[q])
            found.queues.add(q)
            if kind is ChangeKind.RAISE_CAP and "/" in (change.resource or ""):
                # A device cap decides which pools untyped GPUs of the queue may use.
                recompile |= {
                    a.id for a in base.actions if a.queue == q and any(i.untyped for i in a.items)
                }
                found.envs |= {
                    e.index for e in base.envs if e.queue == q and any(i.untyped for i in e.items)
                }
        elif kind is ChangeKind.ADD_NODES:
            c = cluster_of[change.cluster or ""]
            p = pool_of[(c, change.node_pool or "")]
            pool = pools[p]
            spec = next(n for n in changed.clusters[c].node_pools if n.name == pool.name)
            wider = pool_scale(spec)
            extra = np.zeros((wider - pool.max_nodes, len(base.dims)), dtype=np.int64)
            used = np.concatenate([pool.used, extra])
            pools[p] = replace(pool, max_nodes=wider, used=used)
            found.clusters.add(pool.cluster)
            found.pools.add(p)
        elif kind is ChangeKind.ADD_POOL:
            c = cluster_of[change.cluster or ""]
            assert settings is not None, "compiled for the pool added"
            compiled = next(
                pool
                for pool in settings.pools
                if pool.cluster == c and pool.name == (change.node_pool or "")
            )
            # After every pool of the tick, so theirs keep their indices; within its cluster
            # it comes last, as compiled.
            p = len(pools)
            pools.append(replace(compiled, index=p))
            pool_of[(c, change.node_pool or "")] = p
            pools_of_cluster[c] = [*pools_of_cluster[c], p]
            rematch |= {q.index for q in queues if c in q.clusters}
            found.clusters.add(c)
            found.pools.add(p)
        elif kind in REQUEST_CHANGES or kind is ChangeKind.ROUTE_TO_QUEUE:
            recompile.add(action_id)
            if target.env is not None:
                found.envs.add(target.env)
    if any(c.kind is ChangeKind.WAIT_FOR_FINISH for c in changes):
        found.hurts = True
        found.absent = _finish(state, snapshot, changed, changes, queues, pools, found)
    if recompile or found.envs:
        again = [a for a in changed.actions if a.id in recompile]
        queued = [a.model_copy(update={"state": ActionState.QUEUED}) for a in again]
        fresh = compile_snapshot(_without_actions(changed, changed.environments, queued))
        for info in fresh.actions:
            actions[index[info.id]] = replace(info, index=index[info.id])
            found.actions.add(index[info.id])
        for e in found.envs:
            envs[e] = fresh.envs[e]
        if len(pools) > len(base.pools):
            # Compiled afresh, their pools are numbered as the changed snapshot's.
            rematch |= {actions[i].queue for i in found.actions}
            rematch |= {envs[e].queue for e in found.envs}
    problem = base.changed(
        queues=queues,
        pools=pools,
        pools_of_cluster=pools_of_cluster,
        pool_cluster=np.array([pool.cluster for pool in pools], dtype=np.int64),
        actions=actions,
        envs=envs,
        cluster_room=(
            clusters_room(pools, pools_of_cluster, len(base.dims)) if grows else base.cluster_room
        ),
    )
    routed = any(c.kind is ChangeKind.ROUTE_TO_QUEUE for c in changes)
    # A routed action moves in the line, maybe back: then every action is matched again.
    upto = target.index + 1 if ahead_only and not routed else None
    found.problem = match_pools_again(problem, rematch, upto) if rematch else problem
    if routed:
        _move(state, snapshot, found)
    found.anywhere = state.every_unit_moves
    line = found.problem
    if found.anywhere and len(pools) > len(base.pools):
        found.components = pool_components(line, whole_units=True)
    else:
        # A pool added starts as a component of its own, joined by the containers matched
        # to it again (and those compiled again).
        added_pools = np.arange(len(base.pools), len(pools), dtype=np.int64)
        components = np.concatenate([state.pool_components(), added_pools])
        lists = [line.actions[i].items for i in found.actions]
        if rematch:
            lists += [a.items for a in line.actions[:upto] if a.queue in rematch]
        lists += [env.items for env in line.envs if env.index in found.envs or env.queue in rematch]
        found.components = joined(components, lists, found.anywhere)
    return found


def _move(state: TickState, snapshot: Snapshot, found: Patched) -> None:
    """Put the routed action at its place in the line (priority, then submission, then the
    snapshot's order: compile_snapshot's), and end the line there.

    Behind it nothing needs deciding. Moved ahead, it takes the place of the action there;
    moved back, its old place stays, taken out of the line, so that the actions between keep
    their indices. Its old queue's actions are decided again, unless the tick failed it (a
    failed action holds no place in its queue's depth and heads no strict line).
    """
    problem = found.problem
    t = found.target
    moved = problem.actions[t]
    position = {a.id: n for n, a in enumerate(snapshot.actions)}

    def key(action: ActionInfo) -> tuple[int, datetime, int]:
        priority = problem.queues[action.queue].priority
        return (-priority, action.submitted_at, position[action.id])

    line = problem.actions
    # Its own old place holds it under its new queue: keys are otherwise in order.
    ahead = bisect_left(line[:t], key(moved), key=key)
    if ahead == t:
        ahead += bisect_left(line[t + 1 :], key(moved), key=key)
    if ahead > t:
        found.absent = found.absent | {t}
        _gives_back_room(state, found, [t])  # what the tick admitted there holds no room now
        ahead += 1  # its old place, kept
    found.target = ahead
    found.arrived = frozenset({ahead})
    found.actions = (found.actions - {t}) | {ahead}
    found.problem = problem.changed(actions=[*line[:ahead], replace(moved, index=ahead)])
    if t not in state.failures:
        found.queues.add(state.problem.actions[t].queue)


def _gives_back_room(state: TickState, found: Patched, taken_out: Iterable[int]) -> None:
    """The clusters and pools where actions taken out of the line had been admitted: their
    room is free to every action routed there."""
    for i in taken_out:
        placement = state.plan.admitted.get(i)
        env = state.problem.actions[i].env
        if placement is None and env is not None:
            placement = state.plan.env_started.get(env)  # it may have started its pool
        if placement is not None:
            found.clusters.add(placement.cluster)
            found.pools.update(p for p, _ in placement.spots)


def _settings(queue: QueueInfo, changed: QueueInfo) -> QueueInfo:
    """`queue` (with what its running work holds) under the settings of `changed`."""
    return replace(
        queue,
        scheduling=changed.scheduling,
        caps=changed.caps,
        action_concurrency=changed.action_concurrency,
        run_concurrency=changed.run_concurrency,
        depth=changed.depth,
    )


def _finish(
    state: TickState,
    snapshot: Snapshot,
    changed: Snapshot,
    changes: list[Change],
    queues: list[QueueInfo],
    pools: list,
    found: Patched,
) -> frozenset[int]:
    """Take out the work a wait says finishes: running work gives back its room and its
    queue's charge; admissions of the tick ahead leave the line."""
    actions_of = state.snapshot_actions(snapshot)
    gone = _gone(snapshot, changed, changes, actions_of.by_id)
    gone_ids = {a.id for a in gone}
    running = [a for a in gone if a.state is ActionState.RUNNING]
    base = state.problem
    index = base.positions()
    absent = frozenset(index[a.id] for a in gone if a.id in index)
    found.queues.update(base.actions[i].queue for i in absent)
    _gives_back_room(state, found, absent)
    if not running:
        return absent
    held = compile_snapshot(_without_actions(snapshot, [], running))
    for p, pool in enumerate(held.pools):
        if pool.used.any():
            was = pools[p]
            used = was.used.copy()
            used[: pool.max_nodes] -= pool.used
            pools[p] = replace(was, used=used)
            found.clusters.add(pool.cluster)
            found.pools.add(p)
    for q, queue in enumerate(held.queues):
        if not queue.running:
            continue
        was = queues[q]
        runs = {a.run_id for a in actions_of.running.get(was.name, ()) if a.id not in gone_ids}
        queues[q] = replace(
            was,
            held=was.held + {name: -amount for name, amount in queue.held.items()},
            running=was.running - queue.running,
            active_runs=runs,
        )
        found.queues.add(q)
    return absent


def _gone(
    snapshot: Snapshot, changed: Snapshot, changes: list[Change], by_id: dict[str, Action]
) -> list[Action]:
    """The actions of `snapshot` that `changed` no longer has: those the waits name, when every
    wait names them (the rungs of an explanation's ladders do), else looked for."""
    waits = [c.actions for c in changes if c.kind is ChangeKind.WAIT_FOR_FINISH]
    named = {i for ids in waits for i in ids if i in by_id}
    if all(waits) and len(snapshot.actions) - len(changed.actions) == len(named):
        return [by_id[i] for i in sorted(named)]
    kept = {a.id for a in changed.actions}
    return [a for a in snapshot.actions if a.id not in kept]


def _without_actions(
    snapshot: Snapshot, environments: list, actions: list[Action] | None = None
) -> Snapshot:
    return snapshot.model_copy(
        update={
            "actions": actions or [],
            "environments": environments,
            "scheduling_policies": [],
            "service_environments": [],
            "job_queues": [],
            "jobs": [],
        }
    )


def touches(
    patched: Patched, target: int, room: Callable[[ActionInfo], bool] | None = None
) -> Callable[[ActionInfo], bool]:
    """Which actions the change may let in: the target, those of a changed queue, those
    routed to a cluster whose room it changes or whose request it changes (`_routed`), and,
    where every unit may move anywhere, those the room reaches through moved units
    (`room`: `reaches_room(patched)`, made here if not given)."""
    routed = _routed(patched)
    reached = (room or reaches_room(patched)) if patched.anywhere else None

    def touched(action: ActionInfo) -> bool:
        return (
            action.index == target
            or action.queue in patched.queues
            or routed(action)
            or (reached is not None and reached(action))
        )

    return touched


def reaches_room(patched: Patched) -> Callable[[ActionInfo], bool]:
    """Which actions the change may give room to or change the request of: those compiled
    again, those of a changed environment, and those with a container whose pools are
    connected (solver.placement.connected) to the pools with room added or freed, or to the
    pools of work ahead compiled again (which may now land elsewhere). Unless every unit may
    move anywhere, only actions routed to a cluster with room added or freed count: the
    tick's checks then move only the units on the action's own nodes. For the others a
    refusal for room stands (solver.placement.resume): their pools have no more room than
    in the tick."""
    components = patched.components
    routed = None if patched.anywhere else _routed_queues(patched)
    line = patched.problem
    moved = [line.actions[i].items for i in patched.actions if i != patched.target]
    moved += [line.envs[e].items for e in patched.envs]
    seeds = {p for items in moved for item in items for p in item.all_pools.tolist()}
    near = np.isin(components, components[sorted(patched.pools | seeds)])
    envs = patched.problem.envs
    memo: dict[int, bool] = {}  # by item: equal container lists share their items

    def near_items(items: list[Item]) -> bool:
        for item in items:
            known = memo.get(id(item))
            if known is None:
                known = memo[id(item)] = bool(near[item.all_pools].any())
            if known:
                return True
        return False

    def reached(action: ActionInfo) -> bool:
        if _asked_again(patched, action):
            return True
        if routed is not None and action.queue not in routed:
            return False
        return near_items(action.items) or (
            action.env is not None and near_items(envs[action.env].items)
        )

    return reached


def _routed(patched: Patched) -> Callable[[ActionInfo], bool]:
    """The actions routed to a cluster with room added or freed, those compiled again and
    those of a changed environment."""
    routed = _routed_queues(patched)

    def reached(action: ActionInfo) -> bool:
        return action.queue in routed or _asked_again(patched, action)

    return reached


def _routed_queues(patched: Patched) -> set[int]:
    """The queues routed to a cluster with room added or freed."""
    return {q.index for q in patched.problem.queues if not patched.clusters.isdisjoint(q.clusters)}


def _asked_again(patched: Patched, action: ActionInfo) -> bool:
    """Whether the change compiled the action's request again, or its environment's."""
    return action.index in patched.actions or (
        action.env is not None and action.env in patched.envs
    )
