"""Prove a suggestion the way an admin would see it work: re-run the tick with the change made.

The tick walks the line in global order and admits an action exactly when it fits together
with everything admitted before it, so a change cannot alter any decision ahead of the
first action whose own limits it touches (the earliest refused action of a changed queue,
of a queue routing to a changed cluster, or the action itself when its request or queue
changes). So the tick is resumed from there on its own compiled problem with the change
made to it (solver.explain.patch, solver.placement.resume), with the same options, up to
the action. Behind the action nothing is decided again: it cannot change whether the
action runs.

The proof shows whether the action runs, which other actions the change lets in ahead of
it, and which actions the tick schedules now that the changed tick leaves out (displaced).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum

from models.explanation import Change, ChangeKind, Suggestion
from models.result import TickResult, WaitReason
from models.snapshot import (
    Action,
    Snapshot,
)
from solver.explain.changes import apply_changes
from solver.explain.frozen import global_order, plan_placement
from solver.explain.patch import REQUEST_CHANGES, Patched, patch, reaches_room, touches
from solver.placement.best_fit import NO_ROOM
from solver.placement.decode import RoomReasons
from solver.placement.failfast import Failure, fail_fast
from solver.placement.plan import Plan, Refusal
from solver.placement.problem import ActionInfo, CompileCache, compile_snapshot
from solver.placement.resume import Decided, ResultView, TickState, first_touched, resume
from solver.tick import TickOptions

# Replays one explanation may spend, and what each may spend on the checks of the line it
# walks (estimated seconds, as TickOptions counts them: reproducible; the tick's decisions
# that stand are charged what the tick paid) beside the tick's budget, which it follows as the
# tick would. Past either, what is left is reported unproven, not offered.
MOST_REPLAYS = 8
REPLAY_LIMIT_S = 0.2
# Actions of the line the tick did not decide that a proof would decide, from the first the
# change can touch up to the explained one; more would cost about a whole tick at 10,000
# queued, so the suggestion is reported unproven instead.
MOST_REDECIDED = 400


@dataclass(frozen=True)
class Replayed:
    """What the tick, re-run with a change, decides for the action and the line ahead of it."""

    runs: bool  # the action is scheduled
    failed: bool  # the action fails (INFEASIBLE or expired)
    message: str  # why it waits or fails when it does not run
    let_in: list[str]  # actions ahead of it the change lets in, in global order
    displaced: list[str]  # actions ahead of it scheduled now that no longer are
    finished: bool  # the replay decided all of it as the whole tick would, within its allowance


class Replayer:
    """Replays of one tick for one action, each with its own changes."""

    def __init__(
        self,
        snapshot: Snapshot,
        action_id: str,
        result: TickResult | None,
        options: TickOptions,
        state: TickState | None = None,
        kept: CompileCache | None = None,
    ) -> None:
        """`result` is the tick of `snapshot` (or an earlier one, as in the service); without
        one, nothing is known ahead of the action and the whole line is replayed. `state` is
        that tick's own (solver.tick.tick_with_state); without it, it is rebuilt from
        `result` the first time a proof needs it, compiling the snapshot with `kept`."""
        self.snapshot = snapshot
        self.result = result
        self.state = state
        self.kept = kept
        self.action_id = action_id
        self.options = options
        # The tick's state keeps them for every explanation of the result.
        self.decided = (
            state.decided(result)
            if state is not None and result is not None
            else Decided.of(result)
        )
        self.replays = 0
        self._line: list[Action] | None = None
        self._view: ResultView | None = None

    def view(self) -> ResultView:
        """The result read against the snapshot: as the tick's state keeps it for all the
        result's explanations, else made for this one."""
        if self.state is not None and self.result is not None:
            return self.state.view(self.snapshot, self.result)
        if self._view is None:
            self._view = ResultView.of(self.snapshot, self.order(), self.decided)
        return self._view

    def within_budget(self) -> bool:
        return self.replays < MOST_REPLAYS

    def prove(self, changes: list[Change], whether: bool = False) -> Replayed | None:
        """The replay with the explanation's limit per replay; None past its budget. With
        `whether`, only whether the action runs matters: a walk that refuses it for sure
        before its turn stops there (the Replayed says only that it does not run)."""
        if not self.within_budget():
            return None
        return self.resumed(changes, REPLAY_LIMIT_S, whether)

    def tick_state(self) -> TickState:
        if self.state is None:
            self.state = state_of(self.snapshot, self.result, self.kept)
        return self.state

    def resumed(
        self, changes: list[Change], proof_limit_s: float, whether: bool = False
    ) -> Replayed:
        """The tick resumed on its own compiled problem with the changes made to it, from
        the first action they can touch up to this one (solver.placement.resume), with the
        tick's options and at most `proof_limit_s` of checks of its own."""
        state = self.tick_state()
        changed = apply_changes(self.snapshot, self.action_id, changes)
        patched = patch(state, self.snapshot, changed, self.action_id, changes, ahead_only=True)
        self.replays += 1
        target = patched.target
        room = reaches_room(patched)
        touched = touches(patched, target, room)
        start = walk_start(state, patched, touched, target)
        # Either walk would cost more than the proof may spend: it is charged the tick's checks
        # of the actions the change leaves alone, or asks them again as the tick did (D455).
        if (
            self._undecided(start, target) >= MOST_REDECIDED
            or state.checks_between(start, target, lambda a: not (touched(a) or room(a)))
            > proof_limit_s
        ):
            return Replayed(False, False, "", [], [], finished=False)
        outcome = resume(
            state,
            patched.problem,
            start,
            target,
            touched,
            patched.absent,
            self.options.time_limit_s,
            self.options.seed,
            proving=True,
            proof_limit_s=proof_limit_s,
            until_refused=whether,
            compiled=frozenset(patched.actions),
            room_touched=room,
            arrived=patched.arrived,
            # The proofs resume the tick with changes that differ a little: many of the
            # placement models a walk meets, the tick or another walk has solved.
            answers=state.proof_answers(),
            path=self._path(changes, patched, proof_limit_s, whether),
        )
        line = outcome.plan.problem
        action = line.actions[target]
        failure = outcome.failures.get(target)
        refusal = outcome.refusals.get(target)
        if failure is not None:
            message = failure.message
        elif refusal == NO_ROOM:
            message = RoomReasons(line, outcome.plan).refusal(action).message
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

    def _path(
        self, changes: list[Change], patched: Patched, proof_limit_s: float, whether: bool
    ) -> Hashable | None:
        """What names a proof's turns ahead of its action (resume's `path`): the changes
        as made (which queues, pools and work they change, and the components of pools
        the room reaches), the tick's options and the proof's, and the queue whose turns
        are its own (`whether`). None for a change of the action itself (its request or
        its queue), whose proofs of other actions are other changes."""
        if any(c.kind in REQUEST_CHANGES or c.kind is ChangeKind.ROUTE_TO_QUEUE for c in changes):
            return None
        goal = patched.problem.actions[patched.target].queue if whether else None
        return (
            tuple(c.model_dump_json() for c in changes),
            frozenset(patched.queues),
            frozenset(patched.pools),
            frozenset(patched.envs),
            frozenset(patched.actions),
            patched.absent,
            patched.components.tobytes(),
            goal,
            proof_limit_s,
            self.options.time_limit_s,
            self.options.seed,
        )

    def _undecided(self, start: int, stop: int) -> int:
        """How many actions of the tick's line from `start` up to `stop` the result did not
        decide (counted once for all the proofs of the result's explanations)."""
        if stop - start < MOST_REDECIDED:
            return stop - start  # too few to matter
        if self.result is None:
            return stop - start
        before = self.tick_state().undecided_before(self.result)
        return int(before[stop] - before[start])

    def refused_ahead(self) -> list[Action]:
        """Actions ahead of this one in the line that the tick did not schedule, in order:
        the ones a change may let in first."""
        scheduled = self.decided.scheduled
        return [a for a in self.order()[: self.position()] if a.id not in scheduled]

    def position(self) -> int | None:
        """This action's place in `order()`, None if it is not there."""
        if self.state is not None:
            return self.state.problem.positions().get(self.action_id)
        return next((i for i, a in enumerate(self.order()) if a.id == self.action_id), None)

    def order(self) -> list[Action]:
        """The snapshot's pending actions in global order: the tick's problem has them so
        (compile_snapshot sorts the same way), when its state is at hand."""
        if self._line is None:
            if self.state is None:
                self._line = global_order(self.snapshot)
            else:
                self._line = self.state.pending(self.snapshot)
        return self._line


def walk_start(
    state: TickState, patched: Patched, touched: Callable[[ActionInfo], bool], stop: int
) -> int:
    """Where a walk of the change up to `stop` starts: the first position whose decision the
    change could alter (solver.placement.resume.first_touched). Where placements decide
    refusals, room added or freed in a cluster moves a whole tick's choice of cluster (the
    least loaded) for every admission routed there, from the first one on (D452)."""
    start = min(stop, first_touched(state, touched, patched.absent, patched.hurts))
    if patched.clusters and state.placements_decide():
        line = patched.problem
        for i in state.admissions():
            if i >= start:
                break
            queue = line.queues[line.actions[i].queue]
            if i not in patched.absent and not patched.clusters.isdisjoint(queue.clusters):
                return i
    return start


class Verdict(StrEnum):
    PROVEN = "proven"  # the re-run tick schedules it and displaces nothing scheduled now
    RULED_OUT = "ruled_out"  # even the largest change tried does not do that
    UNPROVEN = "unproven"  # the budget ran out before a re-run tick could say


# The model's fix (rung 0) with each cap and limit raised by what a walk let in ahead of the
# action takes of it, for `smallest` to try next; None when a change is no such count.
Guess = Callable[[list[Change], Replayed], list[Change] | None]


@dataclass(frozen=True)
class Found:
    verdict: Verdict
    changes: list[Change]
    replayed: Replayed | None


def smallest(
    replayer: Replayer,
    ladders: list[list[Change]],
    accept: Callable[[Replayed], bool],
    guess: Guess | None = None,
) -> Found:
    """The lowest rung of the ladders (each change's versions, smallest first, climbed
    together) whose re-run tick `accept`s; rung 0 is the explanation model's own fix.

    Admitting the action can need more than the model's fix when the change lets earlier
    actions in too; the top rung lets in every earlier action the change could, and a
    bisection between finds the least rung that still works. With `guess` (caps and
    limits), the top rung's walk says what is enough: the rung that holds what it let in
    ahead, proven with the rung below it, is the bisection's answer in two walks when the
    change lets in what it can; when the rung below works too, the change lets fewer in the
    less it is, and what the model's fix let in says what may be enough from below. Of the
    rungs between the ends only whether they work is read, so their walks may stop as soon
    as the action is sure to be refused (`whether`).
    """
    top = max(len(ladder) for ladder in ladders) - 1

    def rung(k: int) -> list[Change]:
        return [ladder[min(k, len(ladder) - 1)] for ladder in ladders]

    first = replayer.prove(rung(0))
    if first is None or not first.finished:
        return Found(Verdict.UNPROVEN, rung(0), first)
    if accept(first):
        return Found(Verdict.PROVEN, rung(0), first)
    if top == 0:
        return Found(Verdict.RULED_OUT, rung(0), first)
    last = replayer.prove(rung(top))
    if last is None or not last.finished:
        return Found(Verdict.UNPROVEN, rung(top), last)
    if not accept(last):
        return Found(Verdict.RULED_OUT, rung(top), last)
    low, high, best = 0, top, last
    enough = guess(rung(0), last) if guess is not None else None
    if guess is not None and enough is not None:
        # Enough for what the top rung let in, and (as a rung just below a working one)
        # the proof that the rung below is not.
        k = next((k for k in range(1, top) if _no_higher(enough, rung(k))), top)
        for candidate in (k, k - 1):
            if not low < candidate < high:
                continue
            replayed = replayer.prove(rung(candidate), whether=True)
            if replayed is None:
                return Found(Verdict.PROVEN, rung(high), best)
            if not (replayed.finished and accept(replayed)):
                low = candidate
                break
            high, best = candidate, replayed
        below = guess(rung(0), first) if low == 0 and high > 1 else None
        lower = below is not None and _no_higher(below, rung(high)) and below != rung(high)
        if below is not None and lower and not _no_higher(below, rung(0)):
            # A smaller change lets fewer in ahead: enough for what the model's fix let in
            # can be below every rung.
            replayed = replayer.prove(below, whether=True)
            if replayed is None:
                return Found(Verdict.PROVEN, rung(high), best)
            if replayed.finished and accept(replayed):
                return Found(Verdict.PROVEN, below, replayed)
            low = max((k for k in range(low, high) if _no_higher(rung(k), below)), default=low)
    while high - low > 1:
        middle = (low + high) // 2
        replayed = replayer.prove(rung(middle), whether=True)
        if replayed is None:
            break  # the top rung is proven; the budget only cut the search for less
        if replayed.finished and accept(replayed):
            high, best = middle, replayed
        else:
            low = middle
    return Found(Verdict.PROVEN, rung(high), best)


def _no_higher(changes: list[Change], than: list[Change]) -> bool:
    """Every change the same as `than`'s, or a cap or limit set no higher."""
    return all(
        c == t or (isinstance(c.value, int) and isinstance(t.value, int) and c.value <= t.value)
        for c, t in zip(changes, than, strict=True)
    )


def runs_displacing_nothing(replayed: Replayed) -> bool:
    return replayed.runs and not replayed.displaced


def who_runs(action_id: str, replayed: Replayed) -> str:
    """`it runs`, or `a2 and a5 run` when the change lets a2 in ahead of a5."""
    if not replayed.let_in:
        return "it runs"
    return f"{listed([*replayed.let_in, action_id])} run"


class Proofs:
    """The suggestions of one explanation, each proven by re-running the tick before it is
    offered; the rest are reported unproven or ruled out, in words."""

    def __init__(self, replayer: Replayer) -> None:
        self.replayer = replayer
        self.suggestions: list[Suggestion] = []
        self.unproven: list[Suggestion] = []
        self.ruled_out: list[str] = []

    def offer(
        self,
        ladders: list[list[Change]],
        words: Callable[[list[Change]], str],
        guess: Guess | None = None,
    ) -> None:
        """Offer the smallest rung of `ladders` with which the tick runs the action and
        still runs everything it schedules now."""
        found = smallest(self.replayer, ladders, runs_displacing_nothing, guess)
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


def state_of(
    snapshot: Snapshot, result: TickResult | None, kept: CompileCache | None = None
) -> TickState:
    """The tick's state rebuilt from `snapshot` and its result: the snapshot compiled (with
    what `kept` holds of an earlier snapshot of the fleet), the result's admissions placed
    where it put them (none of those running by now), its refusals and failures; actions it
    did not decide are judged by fail-fast alone."""
    problem = compile_snapshot(snapshot, kept)
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
        failures.update(fail_fast(problem.changed(actions=rest)))
    # Of its checks' budget the result tells only where it ran out (the first wait for the
    # limit), not what was spent before: a proof starting ahead of that has all of it.
    cut = min((i for i, r in refusals.items() if r.reason is WaitReason.SOLVER_LIMIT), default=None)
    turns = {} if cut is None else {cut: (0.0, 0.0, True)}
    return TickState(problem, failures, plan, refusals, beyond_best_fit=turns)


def _short(replayed: Replayed) -> str:
    """Why a change that was tried is no fix."""
    if replayed.runs:
        return (
            f"it would run, but {listed(replayed.displaced)} scheduled now would not, so no"
            " change of this kind lets it in without displacing work"
        )
    why = f": {replayed.message}" if replayed.message else ""
    return f"the tick re-run with it still does not run it{why}"


def listed(ids: list[str]) -> str:
    """`a2`, `a2 and a5`, `a2, a4 and a5`."""
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + f" and {ids[-1]}"
