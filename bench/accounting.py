"""What a tick's plan admits and leaves allocated, checked against the snapshot it came from.

The engine's TickResult and the baseline's plan are scored by the same replay:
running work is charged first, then every new placement, on the node-room and
queue ledgers of fixtures.fleets. The replay also checks the plan (a node over its
room, a queue over a cap it was under, a container on a pool that cannot take it),
so a benchmark run doubles as a check of the engine's answers at scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fixtures.fleets import Fleet, Need, QueueLedger, demand_of, need_of
from models.resources import UNTYPED_GPU, ResourceVector
from models.result import EnvironmentStart, ScheduledAction
from models.snapshot import ActionState, Container, Placement, Snapshot


@dataclass
class TickAssessment:
    actions: int  # actions admitted this tick
    gpus: int  # GPUs newly placed this tick
    gpu_allocation: float  # share of the fleet's full-scale GPUs requested after the tick
    cpu_allocation: float  # same for CPU
    problems: list[str] = field(default_factory=list)


def assess(
    snapshot: Snapshot,
    scheduled: Sequence[ScheduledAction],
    environments_started: Sequence[EnvironmentStart],
) -> TickAssessment:
    """Replay running work and the plan; count what is admitted and what the fleet holds."""
    default_type = snapshot.settings.default_gpu_type
    fleet = Fleet(snapshot.clusters)
    ledgers = {q.name: QueueLedger(q) for q in snapshot.queues}
    envs = {e.name: e for e in snapshot.environments}
    actions = {a.id: a for a in snapshot.actions}
    for env in snapshot.environments:
        if env.running and env.placement is not None:
            _charge(
                fleet,
                ledgers[env.queue],
                env.placement,
                env.replica_containers(),
                default_type,
                None,
            )
    for action in snapshot.actions:
        if action.state is ActionState.RUNNING and action.placement is not None:
            _charge(
                fleet,
                ledgers[action.queue],
                action.placement,
                action.containers,
                default_type,
                None,
            )
    before = {name: ledger.held for name, ledger in ledgers.items()}

    problems: list[str] = []
    gpus = 0
    for start in environments_started:
        env = envs[start.environment]
        containers = env.replica_containers()
        gpus += _charge(
            fleet, ledgers[env.queue], start.placement(), containers, default_type, problems
        )
    for entry in scheduled:
        queued = actions.get(entry.action)
        if queued is None or queued.state is not ActionState.QUEUED:
            problems.append(f"{entry.action}: scheduled but not a queued action of the snapshot")
            continue
        if queued.environment is not None:
            continue  # charged once through its environment's start, or joins a running pool
        placement = entry.placement()
        if placement is None:
            problems.append(f"{entry.action}: scheduled without a cluster")
            continue
        gpus += _charge(
            fleet, ledgers[queued.queue], placement, queued.containers, default_type, problems
        )

    for pool in fleet.all_pools():
        for node in range(pool.size):
            if pool.overfull(node):
                problems.append(f"{pool.cluster}/{pool.name} node {node}: requests exceed its room")
    for name, ledger in ledgers.items():
        problems.extend(_cap_problems(ledger, before[name]))

    total_gpus = total_cpu = held_gpus = held_cpu = 0
    for pool in fleet.all_pools():
        pool_gpus, pool_cpu = pool.capacity()
        total_gpus += pool_gpus
        total_cpu += pool_cpu
        held_gpus += pool_gpus - sum(pool.free_gpus)
        held_cpu += pool_cpu - sum(pool.free_cpu)
    return TickAssessment(
        actions=len(scheduled),
        gpus=gpus,
        gpu_allocation=held_gpus / total_gpus if total_gpus else 0.0,
        cpu_allocation=held_cpu / total_cpu if total_cpu else 0.0,
        problems=problems,
    )


def _charge(
    fleet: Fleet,
    ledger: QueueLedger,
    placement: Placement,
    containers: list[Container],
    default_type: str | None,
    problems: list[str] | None,
) -> int:
    """Charge one placed unit; with `problems`, check where it sits first. Returns its GPUs."""
    needs = [need_of(c, default_type) for c in containers]
    if problems is not None:
        problems.extend(_placement_problems(fleet, ledger, placement, needs))
        if len(placement.containers) != len(needs):
            return 0
    spots = fleet.occupy(placement, needs)
    ledger.charge(demand_of(containers, needs), spots, needs)
    return sum(need.gpus for need in needs)


def _placement_problems(
    fleet: Fleet, ledger: QueueLedger, placement: Placement, needs: list[Need]
) -> list[str]:
    queue = ledger.queue
    where = f"queue {queue.name} on {placement.cluster}"
    if queue.clusters is not None and placement.cluster not in queue.clusters:
        return [f"{where}: the queue does not route there"]
    if sorted(c.name for c in placement.containers) != sorted(n.name for n in needs):
        return [f"{where}: placement names other containers than the unit has"]
    by_name = {need.name: need for need in needs}
    problems = []
    for spot in placement.containers:
        need = by_name[spot.name]
        try:
            pool = fleet.pool(placement.cluster, spot.node_pool)
        except KeyError:
            problems.append(f"{where}: unknown pool {spot.node_pool}")
            continue
        if not pool.admits(need):
            problems.append(f"{where}: {spot.name} cannot run on pool {pool.name}")
        if not 0 <= spot.node < pool.size:
            problems.append(f"{where}: node {spot.node} is beyond pool {pool.name}")
    return problems


def _cap_problems(ledger: QueueLedger, before: ResourceVector) -> list[str]:
    """A cap the plan pushed usage past (usage already over a lowered cap may stay there)."""
    queue, after = ledger.queue, ledger.held
    problems = []
    for name, cap in queue.caps.items():
        was, now = before.amount(name), after.amount(name)
        if now > was and now > cap:
            label = "untyped gpus" if name == UNTYPED_GPU else name
            problems.append(f"queue {queue.name}: {label} {now} over cap {cap} (was {was})")
    return problems
