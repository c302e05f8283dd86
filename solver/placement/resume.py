"""Resume a tick part way down the line, on a changed problem, from the tick's own decisions.

The tick admits an action exactly when it fits together with every admission ahead of it
(solver.tick), so a change that relaxes limits (a cap or a limit raised, a queue switched
to greedy_capacity, nodes or a pool added, running work taken out, one action's request
changed or the action routed to another queue)
cannot alter a decision ahead of the first refused action whose own limits it touches:
`start`. From there the walk goes on from the tick's state there (its admissions where they
sat then, before checks further down moved them; its bounds and its memory of requests that
found no room counting them) with the tick's own pieces (the Decider's verdict for one
action: caps and limits, best-fit, the placement model), and two shortcuts that give the
same answer:

- in a tick whose refusals are all proven, an admission of the tick is admitted again where
  the tick put it when that still has the room and passes its caps and limits (and what
  the tick's check moved at that turn moves as it did); on nodes where the walk placed
  nothing the tick did not, the room is there, and is taken later for many admissions at
  once (Plan.settle). Not one the change gives room to: best-fit weighs that room (the least
  loaded cluster, the node it fills most) and may place it elsewhere, as a whole tick would
  (D450). Where placements may decide a refusal (the limit cut the tick, or a check left
  one unproven), every admission is placed again by best-fit, as a whole tick of the
  change places it on the room the walk leaves (D452);
- while nothing the tick admitted has been refused again, a refusal of an action the
  change does not touch stands, and so does a refusal for room of one whose room and
  request it leaves alone (only its queue's caps or limits raised, or room given only to
  pools its containers are not connected to: solver.placement.connected; in a tick whose
  checks let every unit move, work the room reaches counts as touched): the actions
  admitted ahead of it are a superset of the tick's, and what did not fit with fewer does
  not fit with more (admissions are downward closed). A strict line whose refused head gets in is
  touched from there on.

Either holds only as far as the checks' budget goes: the walk spends the tick's budget as it
stood at `start`, and a decision the tick took beyond best-fit (a repair, a bound, a model)
stands only while the walk has let nothing in and its budget is where the tick's was (then
charged the same); a wait for the tick's limit stands only once the walk's budget has run out
too. Past the limit, best-fit has the last word, as in the tick.

Once something the tick admitted is refused (displaced), neither holds for what follows,
and every later action is decided again, unless the caller only wanted to know that: a
proof (`proving`) stops there, and when it would spend more of its own than it is allowed.

Where every admission is placed again, the turns caps, limits and best-fit settle, and the
refusals that stand between them, are walked by the compiled ledger in stretches (D453).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from models.errors import ErrorCode
from models.resources import EMPTY
from models.result import (
    EnvironmentStart,
    FailedAction,
    ScheduledAction,
    TickResult,
    WaitingAction,
    WaitReason,
)
from models.snapshot import Action, ActionState, Snapshot
from solver.placement.best_fit import PassWords, over_depth
from solver.placement.bounds import RoomBounds
from solver.placement.connected import pool_components
from solver.placement.decide import (
    EXACT_NEIGHBOURHOOD_UNITS,
    Decider,
    ModelAnswer,
    ModelAnswers,
    ModelCheckBudget,
    NoRoomMemo,
    placement_in,
)
from solver.placement.failfast import Failure, fail_fast
from solver.placement.plan import NodeAssignment, Plan, Refusal, Spot, UnitKey
from solver.placement.problem import ActionInfo, CompileCache, Item, Problem

ROOM = (WaitReason.CLUSTER_ROOM, WaitReason.LOWER_PRIORITY)  # refusals for room (decoded)
# Placement models the proofs of one tick's explanations keep (their answers are keyed by
# everything the model reads, so any walk that meets one again may reuse it); past this
# many, the oldest go. Explanations of the same tick meet many of the same models: the walks
# of changes to one cluster begin at the same refusals.
KEPT_ANSWERS = 1000
# Proofs that stopped short of their action (TickState.stopped_before) a state keeps; past
# this many, the oldest go. Each is a few numbers.
KEPT_STOPPED = 1000
TAKEN_OUT = Failure(ErrorCode.FAILED_PRECONDITION, "taken out of the line by the change")


@dataclass(frozen=True)
class Decided:
    """A tick result's decisions by action id (environment starts by environment): what every
    explanation of the result looks up, made once for all of them (TickState.decided)."""

    scheduled: dict[str, ScheduledAction]
    failed: dict[str, FailedAction]
    waiting: dict[str, WaitingAction]
    env_starts: dict[str, EnvironmentStart]

    @staticmethod
    def of(result: TickResult | None) -> Decided:
        """`result`'s decisions; none without one."""
        if result is None:
            return Decided({}, {}, {}, {})
        return Decided(
            {s.action: s for s in result.scheduled},
            {f.action: f for f in result.failed},
            {w.action: w for w in result.waiting},
            {e.environment: e for e in result.environments_started},
        )

    def __contains__(self, action_id: str) -> bool:
        """Whether the result decided the action (scheduled, failed or left waiting)."""
        return action_id in self.scheduled or action_id in self.failed or action_id in self.waiting


@dataclass(frozen=True)
class ResultView:
    """A tick result read against a snapshot, for the world of each of its explanations
    (solver.explain.frozen), made once for all of them (TickState.view): what it decided along
    the line (`order`: the snapshot's pending actions in global order), where its admissions
    and the snapshot's running work sit, and where the snapshot lists its actions."""

    order: list[Action]
    decided: Decided
    admitted_at: list[int]  # the line's positions the result schedules, in order
    admitted: list[tuple[Action, ScheduledAction]]  # and those actions with their decisions
    env_first: list[tuple[int, str]]  # the first admission of each pool that starts, in order
    # Per queue, the line's positions the result neither schedules nor fails, and whether
    # each waits past the queue's depth.
    refused: dict[str, tuple[list[int], list[bool]]]
    pools: dict[str, frozenset[tuple[str, str]]]  # (cluster, pool) of work, by action id
    running: list[tuple[int, Action]]  # by place in snapshot.actions
    pending_at: dict[str, int]  # a pending action's place in snapshot.actions

    @staticmethod
    def of(snapshot: Snapshot, order: list[Action], decided: Decided) -> ResultView:
        admitted_at: list[int] = []
        admitted: list[tuple[Action, ScheduledAction]] = []
        env_first: list[tuple[int, str]] = []
        starting: set[str] = set()
        refused: dict[str, tuple[list[int], list[bool]]] = {}
        for at, action in enumerate(order):
            decision = decided.scheduled.get(action.id)
            if decision is not None:
                admitted_at.append(at)
                admitted.append((action, decision))
                env = action.environment
                if env is not None and env in decided.env_starts and env not in starting:
                    starting.add(env)
                    env_first.append((at, env))
            elif action.id not in decided.failed:
                waiting = decided.waiting.get(action.id)
                positions, deep = refused.setdefault(action.queue, ([], []))
                positions.append(at)
                deep.append(waiting is not None and waiting.reason is WaitReason.DEPTH)
        pools: dict[str, frozenset[tuple[str, str]]] = {}
        running: list[tuple[int, Action]] = []
        pending_at: dict[str, int] = {}
        for at, action in enumerate(snapshot.actions):
            if action.state is ActionState.RUNNING:
                running.append((at, action))
                placement = action.placement
                if placement is not None:
                    pools[action.id] = frozenset(
                        (placement.cluster, c.node_pool) for c in placement.containers
                    )
                continue
            pending_at[action.id] = at
            decision = decided.scheduled.get(action.id)
            if decision is None:
                continue
            # An admission that starts its reusable pool sits where the pool starts.
            start = decided.env_starts.get(action.environment or "")
            if decision.cluster is None and start is not None:
                pools[action.id] = frozenset((start.cluster, c.node_pool) for c in start.containers)
            elif decision.cluster:
                pools[action.id] = frozenset(
                    (decision.cluster, c.node_pool) for c in decision.containers
                )
        return ResultView(
            order, decided, admitted_at, admitted, env_first, refused, pools, running, pending_at
        )


@dataclass(frozen=True)
class SnapshotActions:
    """A snapshot's actions by id, and its running ones by queue."""

    by_id: dict[str, Action]
    running: dict[str, list[Action]]

    @staticmethod
    def of(snapshot: Snapshot) -> SnapshotActions:
        by_id: dict[str, Action] = {}
        running: dict[str, list[Action]] = {}
        for action in snapshot.actions:
            by_id[action.id] = action
            if action.state is ActionState.RUNNING:
                running.setdefault(action.queue, []).append(action)
        return SnapshotActions(by_id, running)


@dataclass
class TickState:
    """What a tick leaves to resume from: its compiled problem and every decision of it."""

    problem: Problem
    failures: dict[int, Failure]
    plan: Plan  # the tick's answer: admissions where it put them
    refusals: dict[int, Refusal]  # every pending action neither admitted nor failed
    answers: ModelAnswers = field(default_factory=dict)  # its placement models' (Decider)
    # Its turns that needed more than best-fit, with its checks' budget before and after each
    # (Decider.beyond_best_fit): where a proof's budget stands. A state rebuilt from a result
    # (solver.explain.replay.state_of) knows only where the limit was hit.
    beyond_best_fit: dict[int, tuple[float, float, bool]] = field(default_factory=dict)
    # The units its checks moved, per turn, with where each sat before (Decider.moves): the
    # tick's admissions ahead of a point of its line sat there as these say, not where the
    # checks further down left them. A state rebuilt from a result knows only the last.
    moves: dict[int, list[tuple[UnitKey, NodeAssignment]]] = field(default_factory=dict)
    # Its turns refused for room past best-fit, each with the request its memory of requests
    # that found no room then holds (Decider.no_room): a proof's memory holds them too.
    no_room: dict[int, tuple[int, list[Item], bool]] = field(default_factory=dict)
    # What explanations of this tick compile of the worlds they freeze (solver.explain.frozen):
    # the fleet's container shapes and its running work's charges, compiled once for all.
    worlds: CompileCache = field(default_factory=CompileCache)
    stops_reused: int = 0  # proofs not walked: one on their path had stopped ahead (resume)
    _ledgers: dict[int, Plan] = field(default_factory=dict)
    _pending: tuple[Snapshot, list[Action]] | None = None
    _snapshot_actions: tuple[Snapshot, SnapshotActions] | None = None
    _proofs: ModelAnswers | None = None
    _undecided: tuple[TickResult, np.ndarray] | None = None
    _decided: tuple[TickResult, Decided] | None = None
    _view: tuple[Snapshot, TickResult, ResultView] | None = None
    _components: np.ndarray | None = None
    _spending: tuple[list[int], list[tuple[float, float, bool]]] | None = None
    _moved: dict[UnitKey, list[tuple[int, NodeAssignment]]] | None = None
    _admissions: list[int] | None = None
    _stopped: dict[tuple[Hashable, int], Stopped] = field(default_factory=dict)

    def decided(self, result: TickResult) -> Decided:
        """`result`'s decisions by action id, kept for the last result asked about: every
        explanation of it looks its action up, and reads the line's decisions ahead of it."""
        if self._decided is None or self._decided[0] is not result:
            self._decided = (result, Decided.of(result))
        return self._decided[1]

    def view(self, snapshot: Snapshot, result: TickResult) -> ResultView:
        """`result` read against `snapshot` (the one the tick compiled), kept for the last pair
        asked about: every explanation of the result freezes its world from it."""
        known = self._view
        if known is None or known[0] is not snapshot or known[1] is not result:
            view = ResultView.of(snapshot, self.pending(snapshot), self.decided(result))
            known = self._view = (snapshot, result, view)
        return known[2]

    def undecided_before(self, result: TickResult) -> np.ndarray:
        """Per position of the line, how many actions ahead of it `result` did not decide,
        kept for the last result asked about: the proofs of every explanation of it read it."""
        if self._undecided is None or self._undecided[0] is not result:
            decided = self.decided(result)
            undecided = [a.id not in decided for a in self.problem.actions]
            self._undecided = (result, np.concatenate([[0], np.cumsum(undecided)]))
        return self._undecided[1]

    @property
    def every_unit_moves(self) -> bool:
        """Whether the tick placed few enough units that each of its checks let every one of
        them move anywhere (Decider: EXACT_NEIGHBOURHOOD_UNITS): room added anywhere may
        then reach any work through a chain of moved units (solver.placement.connected)."""
        return len(self.plan.admitted) + len(self.plan.env_started) <= EXACT_NEIGHBOURHOOD_UNITS

    def pool_components(self) -> np.ndarray:
        """The tick's pools by the components its work connects them in
        (solver.placement.connected), made once for the proofs of all its explanations."""
        if self._components is None:
            self._components = pool_components(self.problem, self.every_unit_moves)
        return self._components

    def proof_answers(self) -> ModelAnswers:
        """The answers the proofs of this tick's explanations share: the tick's, then
        theirs, at most KEPT_ANSWERS of them (a state is kept for the next explanation)."""
        if self._proofs is None:
            self._proofs = _Kept(self.answers, KEPT_ANSWERS)
        return self._proofs

    def pending(self, snapshot: Snapshot) -> list[Action]:
        """The pending actions of `snapshot` (the one the tick compiled) in the order of its
        line, kept for the last snapshot asked about: every explanation of the tick reads it."""
        if self._pending is None or self._pending[0] is not snapshot:
            by_id = self.snapshot_actions(snapshot).by_id
            self._pending = (snapshot, [by_id[a.id] for a in self.problem.actions])
        return self._pending[1]

    def snapshot_actions(self, snapshot: Snapshot) -> SnapshotActions:
        """Where `snapshot` lists its actions, kept for the last snapshot asked about: the
        proofs of every explanation of the tick look actions up in it."""
        known = self._snapshot_actions
        if known is None or known[0] is not snapshot:
            known = self._snapshot_actions = (snapshot, SnapshotActions.of(snapshot))
        return known[1]

    def admissions(self) -> list[int]:
        """The positions the tick admitted, in line order, sorted once for every proof."""
        if self._admissions is None:
            self._admissions = sorted(self.plan.admitted)
        return self._admissions

    def budget_at(self, start: int) -> tuple[float, bool]:
        """The checks' budget spent ahead of position `start`, and whether the limit was hit
        by then: where a whole tick of a change that alters nothing ahead of `start` stands
        there too."""
        turns, spending = self._turns()
        k = bisect_left(turns, start)
        return (spending[k - 1][1], spending[k - 1][2]) if k else (0.0, False)

    def checks_between(
        self, start: int, stop: int, left_alone: Callable[[ActionInfo], bool]
    ) -> float:
        """What the tick's checks beyond best-fit cost (estimated seconds) for the actions
        `left_alone` from position `start` up to, not including, `stop` (a state rebuilt from a
        result knows none of them: 0)."""
        turns, spending = self._turns()
        actions = self.problem.actions
        return sum(
            spending[k][1] - spending[k][0]
            for k in range(bisect_left(turns, start), bisect_left(turns, stop))
            if left_alone(actions[turns[k]])
        )

    def _turns(self) -> tuple[list[int], list[tuple[float, float, bool]]]:
        """The tick's turns beyond best-fit in line order, and each one's budget before and
        after it (Decider.beyond_best_fit), sorted once for every proof."""
        if self._spending is None:
            turns = sorted(self.beyond_best_fit)
            self._spending = (turns, [self.beyond_best_fit[i] for i in turns])
        return self._spending

    def placements_decide(self) -> bool:
        """Whether where the tick placed its admissions may have decided a refusal: its
        limit cut it, or a check left one unproven. Where every refusal is proven, the
        admissions are the lexicographic optimum wherever they sit."""
        return any(turn[2] for turn in self.beyond_best_fit.values()) or any(
            not proven for _, _, proven in self.no_room.values()
        )

    def stopped_before(self, path: Hashable, start: int, stop: int) -> Stopped | None:
        """A proof on `path` from `start` that stopped ahead of position `stop`: any other on
        the same path stops there too (resume)."""
        known = self._stopped.get((path, start))
        return known if known is not None and known.at < stop else None

    def remember_stopped(self, path: Hashable, start: int, stopped: Stopped) -> None:
        self._stopped[(path, start)] = stopped
        if len(self._stopped) > KEPT_STOPPED:
            del self._stopped[next(iter(self._stopped))]

    def placed_before(
        self, key: UnitKey, turn: int, final: NodeAssignment | None
    ) -> NodeAssignment | None:
        """Where the tick's unit `key` sat when the tick came to `turn`: where the first
        check from there on that moved it found it, else where the tick left it (`final`)."""
        if self._moved is None:
            self._moved = {}
            for at in sorted(self.moves):
                for unit, was in self.moves[at]:
                    self._moved.setdefault(unit, []).append((at, was))
        for at, was in self._moved.get(key, ()):
            if at >= turn:
                return was
        return final

    def ledger_at(self, start: int, absent: frozenset[int] = frozenset()) -> Plan:
        """A plan of the tick's admissions ahead of `start` (none of `absent`), where the
        tick had them when it came to `start`: the walk's state there. Shared ones are kept:
        fork before use."""
        if not absent and start in self._ledgers:
            return self._ledgers[start]
        ledger = Plan(self.problem)
        for i in self.admissions():
            if i >= start:
                break
            if i not in absent:
                action = self.problem.actions[i]
                placement = placement_in(self.plan, action, ledger)
                placement = self.placed_before(ledger.unit_key(action), start, placement)
                ledger.admit(action, placement)
        if not absent:
            self._ledgers[start] = ledger
        return ledger


class _Kept(ModelAnswers):
    """Answers in the order they came, the oldest dropped past `most`."""

    def __init__(self, first: ModelAnswers, most: int) -> None:
        super().__init__(first)
        self.most = most

    def __setitem__(self, key: tuple, answer: ModelAnswer) -> None:
        super().__setitem__(key, answer)
        if len(self) > self.most:
            del self[next(iter(self))]


@dataclass(frozen=True)
class Stopped:
    """Where a proof stopped short of its action (at the turn `at`: something the tick admitted
    was displaced there, or a check could not be paid for), and what it let in and displaced
    by then."""

    at: int
    let_in: list[int]
    displaced: list[int]
    finished: bool


@dataclass
class Resumed:
    """The decisions of the line from `start` to `stop` (inclusive) on the changed problem."""

    plan: Plan
    refusals: dict[int, Refusal]
    failures: dict[int, Failure]
    let_in: list[int]  # refused or undecided by the tick, admitted now
    displaced: list[int]  # admitted by the tick, refused now
    finished: bool  # no check a whole tick would make was left out (the proof's allowance)
    stopped: bool  # `proving`, and the walk stopped where it could no longer prove the change


def resume(
    state: TickState,
    changed: Problem,
    start: int,
    stop: int,
    touched: Callable[[ActionInfo], bool],
    absent: frozenset[int] = frozenset(),
    time_limit_s: float = 2.0,
    seed: int = 0,
    proving: bool = False,
    proof_limit_s: float | None = None,
    until_refused: bool = False,
    compiled: frozenset[int] = frozenset(),
    room_touched: Callable[[ActionInfo], bool] | None = None,
    arrived: frozenset[int] = frozenset(),
    answers: ModelAnswers | None = None,
    path: Hashable | None = None,
) -> Resumed:
    """Decide positions `start`..`stop` of `changed` (the tick's problem with a change made:
    same actions at the same positions, pools and queues at the same indices) as a whole
    tick of it would.

    `touched` says which actions the change itself may let in (their queue's settings,
    their clusters' room or their own request changed): those are decided again, and
    re-judged by fail-fast if the tick failed them or their request was compiled again
    (`compiled`). `absent` actions are taken out of the line (finished work).
    `room_touched` says which of them the change may give room to or change the request of
    (all of `touched` when not given): the tick's refusal of another for room stands while
    nothing is displaced, as an untouched refusal does (the change only raised its queue's
    limits, and room only shrinks as the walk admits more), and the tick's admissions of
    these are decided again rather than put back where they were. `arrived` are positions an
    action was moved to (routed to a queue of another priority): what the tick decided there
    was another action's, so they are decided afresh (they must be `touched` and `compiled`).
    `answers` are placement models solved before (Decider): by the tick, and by the other
    walks of its explanations, which meet many of the same models again. `path` names the
    turns a proof walks: the caller vouches that proofs given the same one from the same
    `start` decide each turn ahead of their own action alike (the same change, made alike
    whichever action is asked about), so where one stopped short of its action, another
    asking about an action further on stops too (TickState.stopped_before), and is not walked.

    The checks' budget is the tick's (`time_limit_s`, `seed`), as it stood at `start`
    (TickState.budget_at): past its limit best-fit has the last word, as in the tick. A
    decision of the tick that needed more than best-fit stands only while the walk has let
    nothing in and its budget is where the tick's was before it, and is charged what the
    tick spent on it; a wait for the tick's limit stands only once the walk's budget has run
    out too. With `proving`, the walk stops at the first displaced action, and once it would
    spend more than `proof_limit_s` from `start` on, the tick's charges included
    (ModelCheckBudget.granted: not finished).
    With `until_refused`, it also stops once the action at `stop` is sure to be refused
    there: a strict head of its queue refused ahead of it, or a cap or limit of its queue
    (other than a device cap, which a move may lift) that refuses it already, since the walk
    only adds to what its queue holds and to its runs.
    """
    room_touched = room_touched or touched
    line = changed.changed(actions=changed.actions[: stop + 1])
    # Every change resume is given relaxes what fail-fast judges (caps, full-scale room) but
    # for a request compiled again: only the tick's failures and `compiled` can change.
    rejudged = [
        a
        for a in line.actions[start:]
        if (a.index in state.failures or a.index in compiled)
        and a.index not in absent
        and touched(a)
    ]
    failures = {
        i: f
        for i, f in state.failures.items()
        if i < start or (i <= stop and not touched(line.actions[i]))
    }
    failures.update(fail_fast(line.changed(actions=rejudged)))
    # Taken out of the line, an action holds no place in its queue's depth either (the
    # count skips what it is given as failed).
    deep = over_depth(line, failures | dict.fromkeys(absent, TAKEN_OUT))
    ledger = state.ledger_at(start, absent).fork(changed)
    walked_failures = {i: f for i, f in failures.items() if start <= i <= stop}
    known = state.stopped_before(path, start, stop) if proving and path is not None else None
    if known is not None:
        state.stops_reused += 1
        return Resumed(
            plan=ledger,
            refusals={},
            failures=walked_failures,
            let_in=list(known.let_in),
            displaced=list(known.displaced),
            finished=known.finished,
            stopped=True,
        )
    spent, limit_hit = state.budget_at(start)
    budget = ModelCheckBudget(
        time_limit_s,
        seed,
        spent=spent,
        limit_hit=limit_hit,
        proof_until=None if proof_limit_s is None else spent + proof_limit_s,
    )
    decider = Decider(line, failures, deep, budget, answers)
    for queue_index, items, _ in ledger.units().values():
        decider.bounds.admit(queue_index, items)
    heads: dict[int, int] = {}
    for i in sorted(state.refusals):
        if i >= start:
            break
        if i not in absent and line.queues[line.actions[i].queue].strict:
            heads.setdefault(line.actions[i].queue, i)
    refusals: dict[int, Refusal] = {}
    shapes = NoRoomMemo()
    for turn in sorted(state.no_room):
        if turn >= start:
            break
        if turn not in absent:
            shapes.add(*state.no_room[turn])
    # Where placements may decide refusals, the tick's admissions are placed again by
    # best-fit, as a whole tick of the change places them on the room the walk leaves.
    again = state.placements_decide()
    # Nodes with less room than the tick left them at this point of the line: where the walk
    # placed what the tick did not (None once the model has moved work: anywhere). Only the
    # tick's admissions put back where they were read it.
    dirty: set[Spot] | None = None if again else set()
    let_in: list[int] = []
    displaced: list[int] = []
    opened: set[int] = set()  # queues whose strict head the change let in
    goal = line.actions[stop]
    # A walk that stops once the action is sure to be refused asks after each turn of its
    # queue: those turns are the walk's own.
    stretches = _Stretches(
        state, line, stop, touched, room_touched, failures, deep, absent, arrived, opened,
        goal.queue if until_refused else None,
    )  # fmt: skip

    def stands(action: ActionInfo, changed: Callable[[ActionInfo], bool]) -> bool:
        """Whether the tick's decision for `action` stands as far as the checks' budget
        goes: it took no more than best-fit, or it did with the walk's budget where the
        tick's was and nothing let in ahead of it, for an action the change leaves alone
        (`changed`: with a cap raised or room given, best-fit may place it at no cost)."""
        turn = state.beyond_best_fit.get(action.index)
        if turn is not None:
            return turn[0] == budget.spent and not let_in and not changed(action)
        refusal = state.refusals.get(action.index)
        return (
            refusal is None or refusal.reason is not WaitReason.SOLVER_LIMIT or budget.exhausted()
        )

    def charge(i: int) -> None:
        """The budget after the tick's decision at `i`, which stands."""
        turn = state.beyond_best_fit.get(i)
        if turn is not None:
            budget.spent, budget.limit_hit = turn[1], turn[2]

    def refused_for_sure(action: ActionInfo) -> bool:
        """Whether, after `action`'s turn, the action at `stop` is sure to be refused."""
        if not until_refused or action.queue != goal.queue or action.index == stop:
            return False
        return goal.queue in heads or ledger.refusal(goal, device_caps=False) is not None

    stopped_at = stop  # where a proof stopped, if short of `stop`
    position = start
    while position <= stop:
        if again and not displaced:
            # The tick's admissions, and the refusals that stand between them, in a stretch
            # walked by the compiled ledger up to the first turn that needs more.
            position = stretches.walk(ledger, position, decider, refusals, heads, shapes)
            if position > stop:
                break
        action = line.actions[position]
        position += 1
        i = action.index
        if i in absent or i in failures:
            continue
        queue = line.queues[action.queue]
        before = i not in arrived and state.plan.admitted.get(i, False) is not False
        refusal: Refusal | None
        if i in deep:
            refusal = Refusal(
                WaitReason.DEPTH, f"queue {queue.name} holds at most {queue.depth} actions"
            )
        elif (
            before
            and action.queue not in heads
            and stands(action, touched)
            and not room_touched(action)
            and not again
            and _admit_where_it_was(state, ledger, action, dirty, compiled, decider.bounds)
        ):
            charge(i)
            if refused_for_sure(action):
                break
            continue
        elif (
            not before
            and not displaced
            and i in state.refusals
            and action.queue not in opened
            and _left_alone(state.refusals[i], action, touched, room_touched)
            and stands(action, room_touched)
        ):
            refusal = state.refusals[i]
            if i in state.no_room:
                shapes.add(*state.no_room[i])
            charge(i)
        else:
            moves = ledger.moves
            verdict = decider.decide(ledger, action, heads, shapes)
            if proving and budget.proof_cut:
                stopped_at = i
                break  # unfinished, whatever follows: no proof
            if isinstance(verdict, Plan):
                ledger = verdict
                if dirty is not None and ledger.moves == moves:
                    dirty.update(_spots(ledger, action))
                else:
                    dirty = None
                if not before:
                    let_in.append(i)
                    if queue.strict and i in state.refusals:
                        opened.add(action.queue)
                        stretches.forget(refusals, position)
                if refused_for_sure(action):
                    break
                continue
            refusal = verdict
        refusals[i] = refusal
        if queue.strict:
            heads.setdefault(action.queue, i)
        if before:
            displaced.append(i)
            if proving:
                stopped_at = i
                break
            stretches.forget(refusals, position)
        if refused_for_sure(action):
            break
    stretches.forget(refusals, position)
    ledger.settle()
    if path is not None and stopped_at < stop:
        state.remember_stopped(
            path, start, Stopped(stopped_at, list(let_in), list(displaced), not budget.proof_cut)
        )
    return Resumed(
        plan=ledger,
        refusals=refusals,
        failures=walked_failures,
        let_in=let_in,
        displaced=displaced,
        finished=not budget.proof_cut,
        stopped=proving and (bool(displaced) or budget.proof_cut),
    )


class _Stretches:
    """The stretches of a walk that places every admission again (TickState.
    placements_decide) which the compiled ledger walks on its own (RoomLedger.walk_decided),
    while nothing the tick admitted has been displaced: the turns the walk decides by caps,
    limits and best-fit alone (the tick's admissions, and refusals the change may lift, but
    only while they stay refused), and between them the refusals that stand whatever the
    walk admits ahead (as in resume: with no check of the tick's behind them to charge, no
    memory of a request that found no room to add, and not for the tick's limit). The first
    turn that needs more (a check, a displacement, a let-in) is the walk's own.
    """

    def __init__(
        self,
        state: TickState,
        line: Problem,
        stop: int,
        touched: Callable[[ActionInfo], bool],
        room_touched: Callable[[ActionInfo], bool],
        failures: dict[int, Failure],
        deep: set[int],
        absent: frozenset[int],
        arrived: frozenset[int],
        opened: set[int],
        asking: int | None,
    ) -> None:
        self.state = state
        self.line = line
        self.stop = stop
        self.touched = touched
        self.room_touched = room_touched
        self.skipped = failures.keys() | absent  # the walk passes them by
        self.own = deep | arrived  # decided by the walk's own hand
        self.opened = opened  # the walk's, as it opens them
        self.asking = asking  # the queue whose every turn is the walk's own, if any
        self.words: PassWords | None = None  # in the words of the walk's ledger
        self.end = 0  # positions up to here are known to be in a stretch
        self.members: set[int] = set()  # the turns of the stretch the ledger decides
        self.standing: list[int] = []  # refusals put in ahead of the walk, in line order

    def walk(
        self,
        ledger: Plan,
        position: int,
        decider: Decider,
        refusals: dict[int, Refusal],
        heads: dict[int, int],
        shapes: NoRoomMemo,
    ) -> int:
        """Walk the stretch from `position`: the position of the first turn that needs the
        walk's own hand (past `stop` when none is left)."""
        if position >= self.end:
            self.end = self._stretch_end(position, refusals)
        if position == self.end:
            return position
        if self.words is None or self.words.plan is not ledger:
            self.words = PassWords(self.line, ledger)
        ledger.settle()
        reached, admitted = ledger.room.walk_decided(
            self.line.actions,
            position,
            self.end,
            self.line.envs,
            [usage.runs for usage in ledger.usage],
            self.members,
            refusals,
            heads,
            shapes,
            self.words,
            EMPTY,
            None,
            kept=self.state.plan.admitted,
        )
        ledger.record(admitted, decider.bounds.admit)
        return reached

    def forget(self, refusals: dict[int, Refusal], position: int) -> None:
        """Take the refusals put in from `position` on out again: the walk stopped there, or
        what stands ahead changed (an admission displaced, after which no refusal stands for
        sure, or a strict queue opened)."""
        for i in self.standing:
            if i >= position:
                refusals.pop(i, None)
        self.standing = []
        self.end = position

    def _stretch_end(self, position: int, refusals: dict[int, Refusal]) -> int:
        """The first position from `position` on that is neither a turn the ledger decides
        nor a refusal that stands (each put in `refusals` now, as the walk would)."""
        state, actions, admitted = self.state, self.line.actions, self.state.plan.admitted
        self.members = set()
        while position <= self.stop:
            i = position
            if i in self.skipped:
                position += 1
                continue
            action = actions[i]
            if i in self.own or action.queue == self.asking:
                break
            refusal = state.refusals.get(i)
            if (
                i in admitted
                or refusal is None
                or action.queue in self.opened
                or not _left_alone(refusal, action, self.touched, self.room_touched)
            ):
                self.members.add(i)  # the walk decides it whatever its budget
            elif (
                refusal.reason is not WaitReason.SOLVER_LIMIT
                and i not in state.no_room
                and i not in state.beyond_best_fit
            ):
                refusals[i] = refusal
                self.standing.append(i)
            else:
                break
            position += 1
        return position


def _left_alone(
    refusal: Refusal,
    action: ActionInfo,
    touched: Callable[[ActionInfo], bool],
    room_touched: Callable[[ActionInfo], bool],
) -> bool:
    """Whether the change leaves the tick's refusal of `action` alone: it does not touch the
    action, or the refusal is for room and the change gives it none (nor its request)."""
    return not touched(action) or (refusal.reason in ROOM and not room_touched(action))


def first_touched(
    state: TickState,
    touched: Callable[[ActionInfo], bool],
    absent: frozenset[int] = frozenset(),
    hurts: bool = False,
) -> int:
    """The first position whose decision a change could alter: the first action the tick
    did not admit that the change touches, or that the tick did not decide at all. A change
    that `hurts` can refuse what the tick admitted (work that finishes ends its run, whose
    later actions then need a run slot of their own): its touched admissions count too."""
    for action in state.problem.actions:
        i = action.index
        if i in absent or (i in state.plan.admitted and not (hurts and touched(action))):
            continue
        if touched(action) or (i not in state.refusals and i not in state.failures):
            return i
    return len(state.problem.actions)


def _admit_where_it_was(
    state: TickState,
    ledger: Plan,
    action: ActionInfo,
    dirty: set[Spot] | None,
    compiled: frozenset[int],
    bounds: RoomBounds,
) -> bool:
    """Admit one of the tick's admissions where the tick put it, if that still holds: its
    untyped GPUs too, where work the walk let in ahead may have filled a device cap.

    On nodes where the walk placed nothing the tick did not, the tick's admissions ahead
    hold no more room than in the tick, so one that fitted there then fits now: its room is
    taken later, with the others' (Plan.settle), instead of checked and taken one by one.
    """
    if ledger.refusal(action) is not None:
        return False
    key = ledger.unit_key(action)
    placement = state.placed_before(key, action.index + 1, placement_in(state.plan, action, ledger))
    items = ledger.items_to_place(action)
    if placement is None:
        if items:
            return False  # it would start a pool the tick did not start for it
        ledger.admit(action, None)
        return True
    if ledger.lands_over_a_cap(action, placement):
        return False
    if (
        dirty is not None
        and action.env is None  # whether it starts its pool depends on the walk
        and action.index not in compiled
        and action.index not in state.moves  # the units its check moved move first
        and dirty.isdisjoint(placement.spots)
    ):
        ledger.admit(action, placement, defer_room=True)
        bounds.admit(action.queue, items)
        return True
    ledger.settle()
    moved = _moved_as_the_tick_did(state, ledger, action)
    if moved is None:
        return False
    taken: dict[tuple[int, int], np.ndarray] = {}
    for item, spot in zip(items, placement.spots, strict=True):
        room = taken.get(spot)
        room = ledger.free[spot[0]][spot[1]] if room is None else room
        left = room - item.request
        if (left < 0).any():
            _move_back(ledger, moved)
            return False
        taken[spot] = left
    ledger.admit(action, placement)
    bounds.admit(action.queue, items)
    return True


def _moved_as_the_tick_did(
    state: TickState, ledger: Plan, action: ActionInfo
) -> list[tuple[UnitKey, NodeAssignment]] | None:
    """Move the units the tick's check moved at `action`'s turn where it moved them, as the
    moves taken (to undo), or None (nothing moved) when one of them is not where the tick
    had it, or its new place lacks the room."""
    turn = action.index
    moves = state.moves.get(turn, [])
    for unit, was in moves:
        if _where(ledger, unit) != was:
            return None
    taken: list[tuple[UnitKey, NodeAssignment]] = []
    for unit, was in moves:
        placement = state.placed_before(unit, turn + 1, _where(state.plan, unit))
        assert placement is not None, "a unit the tick moved sits somewhere"
        ledger.move(unit, placement)
        taken.append((unit, was))
        if any((ledger.free[p][node] < 0).any() for p, node in placement.spots):
            _move_back(ledger, taken)
            return None
    return taken


def _move_back(ledger: Plan, moved: list[tuple[UnitKey, NodeAssignment]]) -> None:
    """Undo `moved` (each unit with where it sat before), the last first."""
    for unit, was in reversed(moved):
        ledger.move(unit, was)


def _where(plan: Plan, unit: UnitKey) -> NodeAssignment | None:
    """Where `plan` has a unit, None when it has not placed it."""
    kind, index = unit
    return (plan.env_started if kind == "env" else plan.admitted).get(index)


def _spots(ledger: Plan, action: ActionInfo) -> set[Spot]:
    """The nodes an admission of the walk took room on (its pool's, if it started one)."""
    placement = ledger.admitted.get(action.index)
    if placement is None and action.env is not None:
        placement = ledger.env_started.get(action.env)
    return set(placement.spots) if placement is not None else set()
