"""Prove a suggestion the way an admin would see it work: re-run the tick with the change made.

The tick walks the line in global order and admits an action exactly when it fits together
with everything admitted before it, so a change cannot alter any decision ahead of the
first action whose own limits it touches (the earliest refused action of a changed queue,
of a queue routing to a changed cluster, or the action itself when its request changes).
A replay keeps those decisions as the tick made them (admissions become running work where
the tick put them, refusals are left out with the depth lowered to still count them, the
refused head of a strict line stays to block it again) and re-decides the rest of the line
up to the action with `solver.tick`, the deterministic engine with the same options. Behind
the action nothing is replayed: it cannot change whether the action runs.

The replay shows whether the action runs, which other actions the change lets in ahead of
it, and which actions the tick schedules now that the changed tick leaves out (displaced).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from models.devices import AcceleratorRequest
from models.explanation import Change, ChangeKind, Suggestion
from models.result import ScheduledAction, TickResult, WaitReason
from models.snapshot import (
    Action,
    ActionState,
    Container,
    ContainerPlacement,
    Placement,
    Queue,
    Scheduling,
    Snapshot,
)
from solver.explain.changes import apply_changes
from solver.explain.frozen import as_running, global_order, plan_placement, started
from solver.explain.patch import Unpatchable, patch, reaches_room, touches
from solver.placement.best_fit import NO_ROOM
from solver.placement.decode import room_refusal
from solver.placement.failfast import Failure, fail_fast
from solver.placement.plan import Plan, Refusal
from solver.placement.problem import compile_snapshot
from solver.placement.resume import TickState, first_touched, resume
from solver.tick import TickOptions, tick

QUEUE_CHANGES = (ChangeKind.RAISE_CAP, ChangeKind.RAISE_LIMIT, ChangeKind.SWITCH_POLICY)
CLUSTER_CHANGES = (ChangeKind.ADD_NODES, ChangeKind.ADD_POOL)

# Replays one explanation may spend, and the time limit of each replayed tick (estimated
# seconds of model checks, as TickOptions counts them: reproducible). Past either, what is
# left is reported unproven rather than offered.
MOST_REPLAYS = 8
REPLAY_LIMIT_S = 0.2
# Admissions ahead that a replay re-decides (so the tick may move them to make room); past
# this many, they are kept where the tick put them.
MOST_PENDING_AHEAD = 16
ROOM_QUEUE = "sluice-explain-room"  # the stand-in queue of other queues' running work
# Actions of the line a replay decides again, from the first the change can touch up to the
# explained one; a replay of more would cost about a whole tick at 10,000 queued, so the
# suggestion is reported unproven instead.
MOST_REDECIDED = 400


@dataclass(frozen=True)
class Replayed:
    """What the tick, re-run with a change, decides for the action and the line ahead of it."""

    runs: bool  # the action is scheduled
    failed: bool  # the action fails (INFEASIBLE or expired)
    message: str  # why it waits or fails when it does not run
    let_in: list[str]  # actions ahead of it the change lets in, in global order
    displaced: list[str]  # actions ahead of it scheduled now that no longer are
    finished: bool  # the replayed tick decided all of it within its time limit


class Replayer:
    """Replays of one tick for one action, each with its own changes."""

    def __init__(
        self,
        snapshot: Snapshot,
        action_id: str,
        result: TickResult | None,
        options: TickOptions,
        state: TickState | None = None,
    ) -> None:
        """`result` is the tick of `snapshot` (or an earlier one, as in the service); without
        one, nothing is known ahead of the action and the whole line is replayed. `state` is
        that tick's own (solver.tick.tick_with_state); without it, it is rebuilt from
        `result` the first time a proof needs it."""
        self.snapshot = snapshot
        self.result = result
        self.state = state
        self.action_id = action_id
        self.options = options
        scheduled = result.scheduled if result else []
        failed = result.failed if result else []
        waiting = result.waiting if result else []
        self.scheduled = {s.action: s for s in scheduled}
        self.failed = {f.action for f in failed}
        self.decided = set(self.scheduled) | self.failed | {w.action for w in waiting}
        self.depth_refused = {w.action for w in waiting if w.reason is WaitReason.DEPTH}
        self.env_starts = {e.environment: e for e in result.environments_started} if result else {}
        self.replays = 0
        self._line: list[Action] | None = None
        self._running: dict[str, Action] = {}  # admissions as running work, made once

    def within_budget(self) -> bool:
        return self.replays < MOST_REPLAYS

    def prove(self, changes: list[Change]) -> Replayed | None:
        """The replay with the explanation's limit per replay; None past its budget."""
        if not self.within_budget():
            return None
        limit = min(REPLAY_LIMIT_S, self.options.time_limit_s)
        try:
            return self.resumed(changes, limit)
        except Unpatchable:
            return self.replay(changes, limit)

    def tick_state(self) -> TickState:
        if self.state is None:
            self.state = state_of(self.snapshot, self.result)
        return self.state

    def resumed(self, changes: list[Change], time_limit_s: float) -> Replayed:
        """The tick resumed on its own compiled problem with the changes made to it, from
        the first action they can touch up to this one (solver.placement.resume)."""
        state = self.tick_state()
        changed = apply_changes(self.snapshot, self.action_id, changes)
        patched = patch(state, self.snapshot, changed, self.action_id, changes)
        self.replays += 1
        target = next(a.index for a in state.problem.actions if a.id == self.action_id)
        touched = touches(patched, target)
        start = min(target, first_touched(state, touched, patched.absent, patched.hurts))
        undecided = sum(
            1 for a in state.problem.actions[start:target] if a.id not in self.decided
        )
        if undecided >= MOST_REDECIDED:
            return Replayed(False, False, "", [], [], finished=False)
        outcome = resume(
            state,
            patched.problem,
            start,
            target,
            touched,
            patched.absent,
            time_limit_s,
            self.options.seed,
            stop_if_displaced=True,
            compiled=frozenset(patched.actions),
            room_touched=reaches_room(patched),
        )
        line = outcome.plan.problem
        action = line.actions[target]
        failure = outcome.failures.get(target)
        refusal = outcome.refusals.get(target)
        if failure is not None:
            message = failure.message
        elif refusal == NO_ROOM:
            message = room_refusal(line, action, outcome.plan).message
        else:
            message = refusal.message if refusal is not None else ""
        ids = state.problem.actions
        return Replayed(
            runs=target in outcome.plan.admitted,
            failed=failure is not None,
            message=message,
            let_in=[ids[i].id for i in outcome.let_in if i != target],
            displaced=[ids[i].id for i in outcome.displaced],
            finished=outcome.finished,
        )

    def refused_ahead(self) -> list[Action]:
        """Actions ahead of this one in the line that the tick did not schedule, in order:
        the ones a change may let in first."""
        order = self.order()
        target = next(i for i, a in enumerate(order) if a.id == self.action_id)
        return [a for a in order[:target] if a.id not in self.scheduled]

    def order(self) -> list[Action]:
        """The snapshot's pending actions in global order: the tick's problem has them so
        (compile_snapshot sorts the same way), when its state is at hand."""
        if self._line is None:
            if self.state is None:
                self._line = global_order(self.snapshot)
            else:
                by_id = {a.id: a for a in self.snapshot.actions}
                self._line = [by_id[a.id] for a in self.state.problem.actions]
        return self._line

    def _changed_order(self, changed: Snapshot, changes: list[Change]) -> list[Action]:
        """The line of the changed snapshot. Only routing moves an action in it (no change
        alters a priority or a submission), so otherwise it is the line as it was."""
        if any(c.kind is ChangeKind.ROUTE_TO_QUEUE for c in changes):
            return global_order(changed)
        by_id = {a.id: a for a in changed.actions if a.state is ActionState.QUEUED}
        return [by_id[a.id] for a in self.order() if a.id in by_id]

    def _as_running(self, action: Action) -> Action:
        running = self._running.get(action.id)
        if running is None:
            running = as_running(action, self.scheduled[action.id])
            self._running[action.id] = running
        return running

    def replay(self, changes: list[Change], time_limit_s: float) -> Replayed:
        self.replays += 1
        changed = apply_changes(self.snapshot, self.action_id, changes)
        order = self._changed_order(changed, changes)
        target = next(i for i, a in enumerate(order) if a.id == self.action_id)
        start = min(target, self._earliest(changed, order, changes))
        if target - start >= MOST_REDECIDED:
            return Replayed(False, False, "", [], [], finished=False)
        world = self._world(changed, order, start, target)
        options = TickOptions(time_limit_s=time_limit_s, seed=self.options.seed)
        outcome = tick(world, options)
        now = {s.action for s in outcome.scheduled}
        window = [a.id for a in order[start:target]]
        message = next(
            (w.message for w in outcome.waiting if w.action == self.action_id),
            next((f.message for f in outcome.failed if f.action == self.action_id), ""),
        )
        return Replayed(
            runs=self.action_id in now,
            failed=any(f.action == self.action_id for f in outcome.failed),
            message=message,
            let_in=[a for a in window if a in now and a not in self.scheduled],
            displaced=[a for a in window if a in self.scheduled and a not in now],
            finished=not outcome.solver.limit_hit,
        )

    def _earliest(self, changed: Snapshot, order: list[Action], changes: list[Change]) -> int:
        """The first position in the line whose decision the changes could alter."""
        queues: set[str] = set()
        clusters: set[str] = set()
        environments: set[str] = set()
        target = next(a for a in self.snapshot.actions if a.id == self.action_id)
        for change in changes:
            queue = change.queue or target.queue
            if change.kind in QUEUE_CHANGES:
                queues.add(queue)
            elif change.kind in CLUSTER_CHANGES:
                clusters.add(change.cluster or "")
            elif change.kind is ChangeKind.WAIT_FOR_FINISH:
                # Finished work frees the queue's caps and the room it held.
                queues.add(queue)
                clusters |= {
                    a.placement.cluster
                    for a in self.snapshot.actions
                    if a.queue == queue and a.state is ActionState.RUNNING and a.placement
                }
                clusters |= {
                    str(self.scheduled[a].cluster)
                    for a in change.actions
                    if a in self.scheduled and self.scheduled[a].cluster
                }
            elif target.environment is not None:
                # A request of an environment is every one of its actions' request.
                environments.add(target.environment)
        routed = {q.name: q.clusters for q in changed.queues}
        for position, action in enumerate(order):
            if action.id not in self.decided:
                return position  # decided after this result: nothing is known of it
            if action.id in self.scheduled:
                continue
            reach = routed.get(action.queue)
            if (
                action.queue in queues
                or action.environment in environments
                or (clusters and (reach is None or not clusters.isdisjoint(reach)))
            ):
                return position
        return len(order)

    def _spots(self, action: Action, decision: ScheduledAction) -> set[tuple[str | None, str]]:
        """The (cluster, pool) pairs an admission's work occupies (its environment's, when
        it starts one)."""
        start = self.env_starts.get(action.environment or "")
        if decision.cluster is None and start is not None:
            return {(start.cluster, c.node_pool) for c in start.containers}
        return {(decision.cluster, c.node_pool) for c in decision.containers}

    def _world(self, changed: Snapshot, order: list[Action], start: int, target: int) -> Snapshot:
        """The changed snapshot with the decisions ahead of `start` kept, nothing behind
        the action.

        Admissions ahead on pools the re-decided part of the line could use stay pending
        when there are few of them (the tick admits them again, and may place them elsewhere
        to make room, as the whole tick would); with more, they are running work where the
        tick put them. Work that cannot touch what is decided again (other queues' work on
        pools none of it could ever use) is left out, so a replay stays small.
        """
        strict = {q.name for q in changed.queues if q.scheduling is Scheduling.STRICT_FIFO}
        window = order[start : target + 1]
        heads: dict[str, Action] = {}
        dropped: dict[str, int] = {}
        admitted: list[tuple[Action, set[tuple[str | None, str]]]] = []
        for action in order[:start]:
            decision = self.scheduled.get(action.id)
            if decision is not None:
                admitted.append((action, self._spots(action, decision)))
            elif action.id in self.failed:
                continue
            elif (
                action.queue in strict
                and action.queue not in heads
                and action.id not in self.depth_refused
            ):
                heads[action.queue] = action  # blocks its line again: the same verdict
            else:
                dropped[action.queue] = dropped.get(action.queue, 0) + 1
        # A refused head blocks only its own line: one with nothing decided again is left out.
        lines = {a.queue for a in window}
        heads = {queue: head for queue, head in heads.items() if queue in lines}
        decided = [*window, *heads.values()]
        usable = usable_pools(changed, decided)
        near = [a for a, spots in admitted if not spots.isdisjoint(usable)]
        if len(near) <= MOST_PENDING_AHEAD:
            decided += near
            usable |= usable_pools(changed, near)
        else:
            near = []
        mine = {a.queue for a in decided}

        def touches(action: Action, spots: set[tuple[str | None, str]]) -> bool:
            return action.queue in mine or not spots.isdisjoint(usable)

        kept: dict[str, Action] = {a.id: a for a in [*heads.values(), *window]}
        started_envs: set[str] = set()
        near_ids = {a.id for a in near}
        for action, spots in admitted:
            if action.id in near_ids:
                kept[action.id] = action
            elif touches(action, spots):
                kept[action.id] = self._as_running(action)
                if action.environment in self.env_starts:
                    started_envs.add(action.environment or "")
        actions = [
            kept.get(a.id, a) if a.state is ActionState.QUEUED else a
            for a in changed.actions
            if a.id in kept or (a.state is ActionState.RUNNING and touches(a, _placed(a)))
        ]
        # Other queues' running work counts only as the room it holds: one stand-in per
        # cluster holds it node by node, so a replay compiles a few actions, not thousands.
        held = [
            a
            for a in actions
            if a.state is ActionState.RUNNING and a.queue not in mine and a.environment is None
        ]
        gone = {a.id for a in held}
        actions = [a for a in actions if a.id not in gone] + _room_holders(held, changed.now)
        env_starts = self.env_starts
        queues = [
            q.model_copy(update={"depth": max(0, q.depth - dropped[q.name])})
            if q.depth is not None and q.name in dropped
            else q
            for q in changed.queues
        ] + [Queue(name=ROOM_QUEUE)]
        environments = [
            started(e, env_starts[e.name]) if e.name in started_envs and not e.running else e
            for e in changed.environments
        ]
        return changed.model_copy(
            update={
                "actions": actions,
                "queues": queues,
                "environments": environments,
                # Quota-managed job queues run apart from capped queues.
                "scheduling_policies": [],
                "service_environments": [],
                "job_queues": [],
                "jobs": [],
            }
        )


class Verdict(StrEnum):
    PROVEN = "proven"  # the re-run tick schedules it and displaces nothing scheduled now
    RULED_OUT = "ruled_out"  # even the largest change tried does not do that
    UNPROVEN = "unproven"  # the budget ran out before a re-run tick could say


@dataclass(frozen=True)
class Found:
    verdict: Verdict
    changes: list[Change]
    replayed: Replayed | None


def smallest(
    replayer: Replayer, ladders: list[list[Change]], accept: Callable[[Replayed], bool]
) -> Found:
    """The lowest rung of the ladders (each change's versions, smallest first, climbed
    together) whose re-run tick `accept`s; rung 0 is the explanation model's own fix.

    Admitting the action can need more than the model's fix when the change lets earlier
    actions in too; the top rung lets in every earlier action the change could, and a
    bisection between finds the least rung that still works.
    """
    top = max(len(ladder) for ladder in ladders) - 1

    def rung(k: int) -> list[Change]:
        return [ladder[min(k, len(ladder) - 1)] for ladder in ladders]

    def attempt(k: int) -> Replayed | None:
        return replayer.prove(rung(k))

    first = attempt(0)
    if first is None or not first.finished:
        return Found(Verdict.UNPROVEN, rung(0), first)
    if accept(first):
        return Found(Verdict.PROVEN, rung(0), first)
    if top == 0:
        return Found(Verdict.RULED_OUT, rung(0), first)
    last = attempt(top)
    if last is None or not last.finished:
        return Found(Verdict.UNPROVEN, rung(top), last)
    if not accept(last):
        return Found(Verdict.RULED_OUT, rung(top), last)
    low, high, best = 0, top, last
    while high - low > 1:
        middle = (low + high) // 2
        replayed = attempt(middle)
        if replayed is None:
            break  # the top rung is proven; the budget only cut the search for less
        if replayed.finished and accept(replayed):
            high, best = middle, replayed
        else:
            low = middle
    return Found(Verdict.PROVEN, rung(high), best)


def runs_displacing_nothing(replayed: Replayed) -> bool:
    return replayed.runs and not replayed.displaced


def who_runs(action_id: str, replayed: Replayed) -> str:
    """`it runs`, or `a2 and a5 run` when the change lets a2 in ahead of a5."""
    if not replayed.let_in:
        return "it runs"
    return f"{_names([*replayed.let_in, action_id])} run"


class Proofs:
    """The suggestions of one explanation, each proven by re-running the tick before it is
    offered; the rest are reported unproven or ruled out, in words."""

    def __init__(self, replayer: Replayer) -> None:
        self.replayer = replayer
        self.suggestions: list[Suggestion] = []
        self.unproven: list[Suggestion] = []
        self.ruled_out: list[str] = []

    def offer(self, ladders: list[list[Change]], words: Callable[[list[Change]], str]) -> None:
        """Offer the smallest rung of `ladders` with which the tick runs the action and
        still runs everything it schedules now."""
        found = smallest(self.replayer, ladders, runs_displacing_nothing)
        sentence = words(found.changes)
        replayed = found.replayed
        if found.verdict is Verdict.PROVEN:
            assert replayed is not None
            self.suggestions.append(
                Suggestion(
                    changes=found.changes,
                    message=f"{sentence}: then {who_runs(self.replayer.action_id, replayed)}",
                    also_runs=replayed.let_in,
                )
            )
        elif found.verdict is Verdict.UNPROVEN:
            self.unproven.append(
                Suggestion(
                    changes=found.changes,
                    message=f"{sentence}: unproven, the tick re-run with it did not finish"
                    " within the explanation's budget",
                )
            )
        else:
            assert replayed is not None
            tried = sentence.removeprefix("or ")
            self.ruled_out.append(f"{tried} (the most of it tried): {_short(replayed)}")


def state_of(snapshot: Snapshot, result: TickResult | None) -> TickState:
    """The tick's state rebuilt from `snapshot` and its result: the snapshot compiled, the
    result's admissions placed where it put them (none of those running by now), its
    refusals and failures; actions it did not decide are judged by fail-fast alone."""
    problem = compile_snapshot(snapshot)
    plan = Plan(problem)
    failures: dict[int, Failure] = {}
    refusals: dict[int, Refusal] = {}
    if result is not None:
        scheduled = {s.action: s for s in result.scheduled}
        starts = {e.environment: e for e in result.environments_started}
        waiting = {w.action: w for w in result.waiting}
        failed = {f.action: f for f in result.failed}
        clusters = {name: i for i, name in enumerate(problem.cluster_names)}
        pools = {(problem.cluster_names[p.cluster], p.name): p.index for p in problem.pools}
        for info in problem.actions:
            if info.id in failed:
                failures[info.index] = Failure(failed[info.id].code, failed[info.id].message)
            elif info.id in waiting:
                w = waiting[info.id]
                refusals[info.index] = Refusal(w.reason, w.message, w.resource)
            decision = scheduled.get(info.id)
            if decision is None:
                continue
            placement = None
            if plan.starts_env(info):
                start = starts.get(problem.envs[info.env].name)  # type: ignore[index]
                if start is None:
                    continue
                placement = plan_placement(start.cluster, start.containers, clusters, pools)
            elif plan.items_to_place(info):
                if decision.cluster is None:
                    continue
                placement = plan_placement(decision.cluster, decision.containers, clusters, pools)
            plan.admit(info, placement)
    decided = set(plan.admitted) | set(failures) | set(refusals)
    rest = [a for a in problem.actions if a.index not in decided]
    if rest:
        failures.update(fail_fast(replace(problem, actions=rest, _base_fit={}, _full_scale={})))
    return TickState(problem, failures, plan, refusals)


def _room_holders(running: list[Action], now: datetime) -> list[Action]:
    """Running actions of the stand-in queue holding, node by node, what `running` holds."""
    spots: dict[str, dict[tuple[str, int], tuple[dict[str, int], int]]] = {}
    for action in running:
        placement = action.placement
        assert placement is not None
        where = {c.name: (c.node_pool, c.node) for c in placement.containers}
        nodes = spots.setdefault(placement.cluster, {})
        for container in action.containers:
            resources, gpus = nodes.get(where[container.name], ({}, 0))
            for name, amount in container.resources.items():
                resources[name] = resources.get(name, 0) + amount
            gpus += container.gpu.count if container.gpu else 0
            nodes[where[container.name]] = (resources, gpus)
    holders = []
    for cluster, nodes in spots.items():
        containers = []
        placed = []
        for (pool, node), (resources, gpus) in nodes.items():
            name = f"{pool}-{node}"
            gpu = AcceleratorRequest(gpus, None) if gpus else None
            containers.append(
                Container.model_construct(name=name, resources=resources, gpu=gpu, node_selector={})
            )
            placed.append(ContainerPlacement.model_construct(name=name, node_pool=pool, node=node))
        holders.append(
            Action.model_construct(
                id=f"{ROOM_QUEUE}-{cluster}",
                run=None,
                queue=ROOM_QUEUE,
                submitted_at=now,
                state=ActionState.RUNNING,
                placement=Placement.model_construct(cluster=cluster, containers=placed),
                containers=containers,
                environment=None,
                max_queued_time=None,
                deadline=None,
            )
        )
    return holders


def _placed(action: Action) -> set[tuple[str | None, str]]:
    placement = action.placement
    if placement is None:
        return set()
    return {(placement.cluster, c.node_pool) for c in placement.containers}


def usable_pools(snapshot: Snapshot, actions: list[Action]) -> set[tuple[str | None, str]]:
    """(cluster, pool) of every node pool a container of `actions` (or of the pool an
    environment of theirs starts) could ever use. Device caps are left out: a change may
    raise one and open a pool to untyped GPUs."""
    names = {a.environment for a in actions}
    solo = snapshot.model_copy(
        update={
            "actions": [a.model_copy(update={"state": ActionState.QUEUED}) for a in actions],
            "environments": [e for e in snapshot.environments if e.name in names],
            "queues": [q.model_copy(update={"max_accelerators": {}}) for q in snapshot.queues],
            "scheduling_policies": [],
            "service_environments": [],
            "job_queues": [],
            "jobs": [],
        }
    )
    problem = compile_snapshot(solo)
    items = [item for info in problem.actions for item in info.items]
    items += [item for env in problem.envs for item in env.items]
    return {
        (problem.cluster_names[problem.pools[p].cluster], problem.pools[p].name)
        for item in items
        for pools in item.pools.values()
        for p in pools
    }


def _short(replayed: Replayed) -> str:
    """Why a change that was tried is no fix."""
    if replayed.runs:
        return (
            f"it would run, but {_names(replayed.displaced)} scheduled now would not, so no"
            " change of this kind lets it in without displacing work"
        )
    why = f": {replayed.message}" if replayed.message else ""
    return f"the tick re-run with it still does not run it{why}"


def _names(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + f" and {ids[-1]}"
