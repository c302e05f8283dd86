"""The first-fit baseline: what a sequential admission system would admit in one pass.

It walks the pending line in global order (queue priority, highest first, then
arrival), applies the queue's depth, run and action concurrency and caps like the
engine does, fails what can never run, and puts each container on the first node
with room: clusters in the queue's routing order, pools in cluster order, nodes in
index order (existing nodes, then nodes the pool may add up to max_nodes). A
strict_fifo queue stops at its first action that does not fit; a greedy_capacity
queue moves on. Unlike the engine it never reconsiders a placement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from fixtures.fleets import Fleet, Need, PoolRoom, QueueLedger, Spot, demand_of, need_of
from models.resources import EMPTY
from models.result import EnvironmentStart, PlacedContainer, ScheduledAction
from models.snapshot import Action, ActionState, Scheduling, Snapshot


@dataclass
class BaselinePlan:
    scheduled: list[ScheduledAction] = field(default_factory=list)
    environments_started: list[EnvironmentStart] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # infeasible or past their queueing limits
    decide_s: float = 0.0  # the pass itself, without building the result models


@dataclass
class _Admitted:
    action: Action
    cluster: str | None
    spots: list[Spot]
    names: list[str]
    starts: str | None  # the environment this action starts


def first_fit(snapshot: Snapshot) -> BaselinePlan:
    """Admit and place the pending line of `snapshot` first-fit, in one pass."""
    started_at = time.perf_counter()
    default_type = snapshot.settings.default_gpu_type
    fleet = Fleet(snapshot.clusters)
    ledgers = {q.name: QueueLedger(q) for q in snapshot.queues}
    envs = {e.name: e for e in snapshot.environments}
    env_needs = {
        e.name: [need_of(c, default_type) for c in e.replica_containers()]
        for e in snapshot.environments
    }
    env_demand = {
        e.name: demand_of(e.replica_containers(), env_needs[e.name]) for e in snapshot.environments
    }
    env_up = {e.name for e in snapshot.environments if e.running}
    for env in snapshot.environments:
        if env.running and env.placement is not None:
            spots = fleet.occupy(env.placement, env_needs[env.name])
            ledgers[env.queue].charge(env_demand[env.name], spots, env_needs[env.name])

    pending: list[tuple[int, datetime, int, Action]] = []
    for position, action in enumerate(snapshot.actions):
        ledger = ledgers[action.queue]
        if action.state is ActionState.RUNNING:
            ledger.start(action.run_id)
            if action.environment is None and action.placement is not None:
                needs = [need_of(c, default_type) for c in action.containers]
                spots = fleet.occupy(action.placement, needs)
                ledger.charge(demand_of(action.containers, needs), spots, needs)
            continue
        pending.append((-ledger.queue.priority, action.submitted_at, position, action))
    pending.sort(key=lambda entry: entry[:3])

    running = {name: ledger.in_flight for name, ledger in ledgers.items()}
    plan = BaselinePlan()
    admitted: list[_Admitted] = []
    stopped: set[str] = set()  # strict_fifo queues whose head did not fit
    seen: dict[str, int] = {}  # waiting actions met per queue, for the depth limit
    feasible: dict[tuple[str, tuple[Need, ...]], bool] = {}
    # Room only shrinks and charges only grow during the pass, so a unit that found no
    # place stays without one for the rest of it (per queue: routing and device caps differ).
    unplaceable: set[tuple[str, tuple[Need, ...]]] = set()
    routes = {
        q.name: tuple(q.clusters) if q.clusters is not None else tuple(fleet.clusters)
        for q in snapshot.queues
    }
    for _, _, _, action in pending:
        ledger = ledgers[action.queue]
        queue = ledger.queue
        if _expired(action, snapshot):
            plan.failed.append(action.id)
            continue
        starts = None
        if action.environment is None:
            needs = [need_of(c, default_type) for c in action.containers]
            demand = demand_of(action.containers, needs)
        elif action.environment in env_up:
            needs, demand = [], EMPTY
        else:
            starts = action.environment
            needs, demand = env_needs[starts], env_demand[starts]
        clusters = routes[action.queue]
        key = (action.queue, tuple(needs))
        if key not in feasible:
            feasible[key] = not needs or fleet.can_ever_run(needs, clusters, ledger.device_allows)
        if not feasible[key] or ledger.exceeds_alone(demand) is not None:
            plan.failed.append(action.id)
            continue
        if action.queue in stopped:
            continue  # failing what can never run does not wait for the head of the line
        seen[action.queue] = seen.get(action.queue, 0) + 1
        if queue.depth is not None and running[action.queue] + seen[action.queue] > queue.depth:
            continue  # beyond the depth the queue holds, counting running work first
        if ledger.slot_refusal(action.run_id) or ledger.cap_refusal(demand):
            if queue.scheduling is Scheduling.STRICT_FIFO:
                stopped.add(action.queue)
            continue
        cluster, spots = None, []
        if needs:
            placed = None
            if key not in unplaceable:
                placed = fleet.place(needs, clusters, ledger.device_ok, PoolRoom.first_node)
            if placed is None:
                unplaceable.add(key)
                if queue.scheduling is Scheduling.STRICT_FIFO:
                    stopped.add(action.queue)
                continue
            cluster, spots = placed
        ledger.charge(demand, spots, needs)
        ledger.start(action.run_id)
        if starts is not None:
            env_up.add(starts)
        admitted.append(_Admitted(action, cluster, spots, [n.name for n in needs], starts))
    plan.decide_s = time.perf_counter() - started_at

    for entry in admitted:
        containers = [
            PlacedContainer(name=name, node_pool=pool.name, node=node, new_node=node >= pool.up)
            for name, (pool, node) in zip(entry.names, entry.spots, strict=True)
        ]
        action = entry.action
        if entry.starts is not None:
            env = envs[entry.starts]
            assert entry.cluster is not None
            plan.environments_started.append(
                EnvironmentStart(
                    environment=env.name,
                    queue=env.queue,
                    cluster=entry.cluster,
                    containers=containers,
                )
            )
            containers = []
        plan.scheduled.append(
            ScheduledAction(
                action=action.id,
                queue=action.queue,
                run=action.run_id,
                cluster=entry.cluster,
                containers=containers,
                environment=action.environment,
            )
        )
    return plan


def _expired(action: Action, snapshot: Snapshot) -> bool:
    waited = snapshot.now - action.submitted_at
    if action.max_queued_time is not None and waited > action.max_queued_time:
        return True
    deadline = action.deadline_at()
    return deadline is not None and deadline <= snapshot.now
