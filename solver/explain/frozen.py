"""The world one pending action sees at its turn in the tick, with every decision ahead fixed.

An explanation asks: given what the tick decided for the actions ahead of this one
in global order (which it admitted and where it put them, which it refused), why
can this one not run too? Two forms of that world are built here from the snapshot
and the tick's result:

- the ledger (`freeze`): the snapshot reduced to what can matter, compiled, with the
  admissions ahead placed on a Plan where the tick put them. The explanation model
  reads room, usage and concurrency off it.
- the proof snapshot (`proof_snapshot`): the same world as a plain snapshot, the
  admissions ahead turned into running work, so `solver.tick` on it (with a limit
  relaxed) shows whether the action then runs: how the tests prove a minimal set.
  (Suggestions are proven on the whole line instead: solver.explain.replay.) The head
  of a strict line is kept in place but held by a cap on a resource nothing else asks
  for, so no relaxation made for this action lets the head in ahead of it: its decision
  stays the tick's.

Work that cannot touch the action is left out: running work and admissions of other
queues on node pools the action could never use, and actions ahead that the tick
refused (other than the head); the queue's depth is lowered by the refused ones of its
own line that are left out, so the depth still counts them.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from models.errors import NotFound
from models.result import EnvironmentStart, ScheduledAction, TickResult
from models.snapshot import (
    Action,
    ActionState,
    Container,
    ContainerPlacement,
    Environment,
    Placement,
    Queue,
    Scheduling,
    Snapshot,
)
from solver.placement.plan import NodeAssignment, Plan
from solver.placement.problem import ActionInfo, CompileCache, Problem, compile_snapshot
from solver.placement.resume import Decided, ResultView

HOLD_RESOURCE = "sluice.dev/explain-held-head"
"""A resource only the proof snapshot's held head asks for; its queue caps it below use."""
HOLD_ENVIRONMENT = "sluice-explain-hold"


@dataclass
class Line:
    """What the tick decided ahead of one pending action, read off its result."""

    action: Action
    queue: Queue
    admitted: list[tuple[Action, ScheduledAction]]  # ahead of it, in global order
    env_starts: dict[str, EnvironmentStart]  # environments started by admissions ahead
    head: Action | None  # the refused head of its strict_fifo line, ahead of it
    dropped: int  # refused actions ahead in its queue that the reduced world leaves out


@dataclass
class Frozen:
    """The ledger form: a compiled reduced world with the admissions ahead placed."""

    line: Line
    world: Snapshot  # the reduced snapshot the problem is compiled from
    problem: Problem
    plan: Plan
    action: ActionInfo


def global_order(snapshot: Snapshot) -> list[Action]:
    """Pending actions by queue priority (highest first), then submission, then position."""
    priority = {q.name: q.priority for q in snapshot.queues}
    pending = [
        (-priority[a.queue], a.submitted_at, position, a)
        for position, a in enumerate(snapshot.actions)
        if a.state is ActionState.QUEUED
    ]
    pending.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in pending]


def viewed(snapshot: Snapshot, result: TickResult) -> ResultView:
    """`result` read against `snapshot`, for one explanation without the tick's state."""
    return ResultView.of(snapshot, global_order(snapshot), Decided.of(result))


def read_line(
    snapshot: Snapshot,
    action_id: str,
    result: TickResult,
    position: int | None = None,
    view: ResultView | None = None,
) -> Line:
    """The decisions ahead of `action_id` (a pending action of `snapshot`) in `result`.

    `result` may come from an earlier snapshot (the service's last tick): admissions
    whose actions are running by now are already in the snapshot as running work.
    `view`: `result` read against the snapshot, when the caller has it; `position`: the
    action's place in its line.
    """
    view = view or viewed(snapshot, result)
    order = view.order
    if position is None:
        position = next((i for i, a in enumerate(order) if a.id == action_id), None)
    if position is None:
        raise NotFound(f"action {action_id!r} is not queued in the snapshot")
    action = order[position]
    queue = snapshot.queue(action.queue)
    admitted = view.admitted[: bisect_left(view.admitted_at, position)]
    starts = view.decided.env_starts
    env_starts: dict[str, EnvironmentStart] = {}
    for at, env in view.env_first:
        if at >= position:
            break
        env_starts[env] = starts[env]
    # Of the actions ahead in its queue that the tick refused, the reduced world keeps the
    # head of a strict line (an action past the depth blocks nothing: the tick skips it)
    # and leaves the rest out.
    refused, deep = view.refused.get(action.queue, ([], []))
    ahead = bisect_left(refused, position)
    head: Action | None = None
    if queue.scheduling is Scheduling.STRICT_FIFO:
        first = next((k for k in range(ahead) if not deep[k]), None)
        head = None if first is None else order[refused[first]]
    return Line(action, queue, admitted, env_starts, head, ahead - (head is not None))


def _usable_pools(snapshot: Snapshot, line: Line) -> set[tuple[str, str]]:
    """(cluster, pool) of every node pool a container of the action (or of the pool its
    environment starts) could ever use. Device caps are left out: raising one (a fix) can
    open a pool to untyped GPUs, and the world must then still hold that pool's work."""
    action = line.action
    solo = snapshot.model_copy(
        update={
            "actions": [action],
            "environments": [e for e in snapshot.environments if e.name == action.environment],
            "queues": [
                q.model_copy(update={"max_accelerators": {}}) if q.name == action.queue else q
                for q in snapshot.queues
            ],
            "scheduling_policies": [],
            "service_environments": [],
            "job_queues": [],
            "jobs": [],
        }
    )
    problem = compile_snapshot(solo)
    info = problem.actions[0]
    items = list(info.items)
    if info.env is not None:
        items += problem.envs[info.env].items
    return {
        (problem.cluster_names[problem.pools[p].cluster], problem.pools[p].name)
        for item in items
        for pools in item.pools.values()
        for p in pools
    }


def _reduced(snapshot: Snapshot, line: Line, view: ResultView, *, fixed: bool) -> Snapshot:
    """The reduced world; with `fixed`, the admissions ahead are running work.

    Work of the action's own queue counts against its caps and limits, so all of it stays;
    of other queues' work, what sits on pools the action could use.
    """
    usable = _usable_pools(snapshot, line)
    mine = line.action.queue
    nowhere: frozenset[tuple[str, str]] = frozenset()

    def touches(action: Action) -> bool:
        return action.queue == mine or not view.pools.get(action.id, nowhere).isdisjoint(usable)

    decisions = {a.id: d for a, d in line.admitted if touches(a)}
    kept = [(view.pending_at[a.id], a) for a, _ in line.admitted if a.id in decisions]
    kept.append((view.pending_at[line.action.id], line.action))
    if line.head is not None:
        kept.append((view.pending_at[line.head.id], line.head))
    kept += [(at, a) for at, a in view.running if touches(a)]
    kept.sort(key=lambda entry: entry[0])  # as the snapshot lists them
    actions: list[Action] = []
    for _, action in kept:
        if fixed and action.id in decisions:
            actions.append(as_running(action, decisions[action.id]))
        elif fixed and line.head is not None and action.id == line.head.id:
            actions.append(_held(action, snapshot))
        else:
            actions.append(action)
    starters = {start.environment for start in line.env_starts.values()}
    queues = []
    for queue in snapshot.queues:
        if queue.name == line.queue.name:
            update: dict = {}
            if queue.depth is not None:
                update["depth"] = max(0, queue.depth - line.dropped)
            if fixed and line.head is not None:
                update["max_resources"] = {**queue.max_resources, HOLD_RESOURCE: 1}
            queue = queue.model_copy(update=update)
        queues.append(queue)
    environments = list(snapshot.environments)
    if fixed:
        environments = [
            started(env, line.env_starts[env.name]) if env.name in starters else env
            for env in environments
        ]
        if line.head is not None:
            hold = _hold_environment(snapshot, line.queue.name)
            if hold is not None:
                environments.append(hold)
    return snapshot.model_copy(
        update={
            "actions": actions,
            "queues": queues,
            "environments": environments,
            # Quota-managed job queues run apart from capped queues: nothing to do with it.
            "scheduling_policies": [],
            "service_environments": [],
            "job_queues": [],
            "jobs": [],
        }
    )


def as_running(action: Action, decision: ScheduledAction) -> Action:
    """An admitted action as the running work it becomes."""
    placement = decision.placement()
    return action.model_copy(update={"state": ActionState.RUNNING, "placement": placement})


def started(env: Environment, start: EnvironmentStart) -> Environment:
    return env.model_copy(update={"running": True, "placement": start.placement()})


def _held(head: Action, snapshot: Snapshot) -> Action:
    """The head with the same containers, the first asking for one unit of the hold resource."""
    containers = head.containers
    if head.environment is not None:
        env = next(e for e in snapshot.environments if e.name == head.environment)
        containers = env.replica_containers()
    # One unit in all: more than the cap of 1 would make the held head infeasible.
    held = [
        Container.model_construct(
            name=c.name,
            resources={**c.resources, HOLD_RESOURCE: 1} if i == 0 else dict(c.resources),
            gpu=c.gpu,
            node_selector=dict(c.node_selector),
        )
        for i, c in enumerate(containers)
    ]
    return head.model_copy(update={"containers": held, "environment": None})


def _hold_environment(snapshot: Snapshot, queue: str) -> Environment | None:
    """A running pool of the queue that holds 2 of the hold resource (capped at 1), so the
    held head stays refused; it takes no room (no node declares the resource) and no
    concurrency slot (pools are not actions)."""
    spots = [
        (cluster.name, pool.name)
        for cluster in snapshot.clusters
        for pool in sorted(cluster.node_pools, key=lambda p: -p.nodes)
        if pool.full_scale
    ]
    if not spots:
        return None
    cluster, pool = spots[0]
    return Environment.model_construct(
        name=HOLD_ENVIRONMENT,
        queue=queue,
        replicas=1,
        resources={HOLD_RESOURCE: 2},
        gpu=None,
        node_selector={},
        running=True,
        placement=Placement.model_construct(
            cluster=cluster,
            containers=[
                ContainerPlacement.model_construct(name="replica-0", node_pool=pool, node=0)
            ],
        ),
    )


def proof_snapshot(snapshot: Snapshot, action_id: str, result: TickResult) -> Snapshot:
    """The world of `action_id` as a snapshot whose tick re-decides only that action.

    Everything ahead of it is running work or, for the head of its strict line, held
    refused; nothing behind it is there. `solver.tick` on this snapshot leaves the
    action waiting exactly when the explanation model does.
    """
    view = viewed(snapshot, result)
    return _reduced(snapshot, read_line(snapshot, action_id, result, view=view), view, fixed=True)


def freeze(
    snapshot: Snapshot,
    action_id: str,
    result: TickResult,
    kept: CompileCache | None = None,
    position: int | None = None,
    view: ResultView | None = None,
) -> Frozen:
    """The ledger form: compile the reduced world and place the admissions ahead (`position`
    and `view` as for `read_line`; `kept`: what earlier explanations of the fleet compiled)."""
    view = view or viewed(snapshot, result)
    line = read_line(snapshot, action_id, result, position, view)
    world = _reduced(snapshot, line, view, fixed=False)
    problem = compile_snapshot(world, kept)
    plan = Plan(problem)
    decisions = {a.id: d for a, d in line.admitted}
    cluster_index = {name: i for i, name in enumerate(problem.cluster_names)}
    pool_index = {(problem.cluster_names[p.cluster], p.name): p.index for p in problem.pools}
    target: ActionInfo | None = None
    for info in problem.actions:
        if info.id == action_id:
            target = info
            break
        decision = decisions.get(info.id)
        if decision is None:
            continue  # the held head: refused
        # A result from an earlier snapshot (the service's) may name an admission whose
        # pool has since started or stopped; without a placement it cannot be on the ledger.
        placement = None
        if plan.starts_env(info):
            start = line.env_starts.get(problem.envs[info.env].name)  # type: ignore[index]
            if start is None:
                continue
            placement = plan_placement(start.cluster, start.containers, cluster_index, pool_index)
        elif plan.items_to_place(info):
            if decision.cluster is None:
                continue
            placement = plan_placement(
                decision.cluster, decision.containers, cluster_index, pool_index
            )
        plan.admit(info, placement, defer_room=True)
    plan.settle()  # all the room at once: nothing placed here reads it in between
    assert target is not None  # the explained action is pending in the reduced world
    return Frozen(line, world, problem, plan, target)


def plan_placement(
    cluster: str,
    containers: list,
    cluster_index: dict[str, int],
    pool_index: dict[tuple[str, str], int],
) -> NodeAssignment:
    return NodeAssignment(
        cluster_index[cluster],
        tuple((pool_index[(cluster, c.node_pool)], c.node) for c in containers),
    )
