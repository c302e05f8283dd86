"""One scheduling tick: snapshot -> fail fast -> best-fit pass -> model -> decide -> decode.

The tick's answer is the lexicographic optimum of admissions in global order
(queue priority, then arrival): walking the line, an action is admitted exactly
when it can be placed together with every action admitted before it. Caps and
concurrency limits are checked exactly without a model; a best-fit pass places
most actions; only an action best-fit could not place (a contested one) costs
a CP-SAT feasibility check, in which every earlier admission may move to make
room. Strict FIFO is a prefix: a refused head blocks the rest of its queue.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from models.result import SolverStatus, TickResult, WaitReason
from models.snapshot import Snapshot
from solver.decode import decode
from solver.failfast import Failure, describe_item, fail_fast
from solver.model import FeasibilityStatus, TickModel
from solver.plan import Plan, Refusal
from solver.problem import ActionInfo, Problem, compile_snapshot


@dataclass(frozen=True)
class TickOptions:
    time_limit_s: float = 5.0  # CP-SAT deterministic time for the tick's checks, and a wall bound
    seed: int = 0


@dataclass
class Outcome:
    """Per-action verdicts of a pass: refusals for the ones not admitted, and which to contest."""

    refusals: dict[int, Refusal] = field(default_factory=dict)
    contested: list[int] = field(default_factory=list)
    heads: dict[int, int] = field(default_factory=dict)  # queue -> the action blocking it


def tick(snapshot: Snapshot, options: TickOptions | None = None) -> TickResult:
    """Decide one tick: which pending actions run now, where, and why the others do not."""
    options = options or TickOptions()
    started = time.perf_counter()
    phases: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        phases[name] = phases.get(name, 0.0) + now - since
        return now

    mark = started
    problem = compile_snapshot(snapshot)
    mark = lap("snapshot", mark)
    failures = fail_fast(problem)
    over_depth = _over_depth(problem, failures)
    mark = lap("fail_fast", mark)
    plan = Plan(problem)
    outcome = best_fit_pass(problem, plan, failures, over_depth, {})
    mark = lap("best_fit", mark)
    decider = _Decider(problem, failures, over_depth, options, started)
    plan, outcome = decider.run(plan, outcome, phases)
    mark = time.perf_counter()
    result = decode(snapshot, problem, plan, failures, outcome.refusals, outcome.heads)
    lap("decode", mark)
    if decider.limit_hit:
        status = SolverStatus.LIMIT_REACHED
    elif decider.model is not None:
        status = SolverStatus.OPTIMAL
    elif problem.actions:
        status = SolverStatus.GREEDY_EXACT
    else:
        status = SolverStatus.NOTHING_TO_DO
    result.solver.status = status
    result.solver.limit_hit = decider.limit_hit
    result.solver.wall_time_s = time.perf_counter() - started
    result.solver.phases_s = phases
    result.solver.model_actions = len(decider.model.members) if decider.model else 0
    result.solver.model_variables = decider.model.num_variables if decider.model else 0
    result.solver.solves = decider.model.solves if decider.model else 0
    return result


def _over_depth(problem: Problem, failures: dict[int, Failure]) -> set[int]:
    """Actions past their queue's depth, counting running work first, then the line in order."""
    seen = [q.running for q in problem.queues]
    over = set()
    for action in problem.actions:
        if action.index in failures:
            continue
        depth = problem.queues[action.queue].depth
        if depth is not None and seen[action.queue] >= depth:
            over.add(action.index)
        seen[action.queue] += 1
    return over


def best_fit_pass(
    problem: Problem,
    plan: Plan,
    failures: dict[int, Failure],
    over_depth: set[int],
    decided: dict[int, Refusal | None],
    start: int = 0,
) -> Outcome:
    """Walk the line from `start`, admitting what fits the caps and a best-fit placement.

    `decided` holds verdicts already proven (None: admitted and already in `plan`);
    they are kept as they are and still block strict queues.
    """
    outcome = Outcome()
    for action in problem.actions[start:]:
        i = action.index
        if i in failures:
            continue
        queue = problem.queues[action.queue]
        if i in decided:
            verdict = decided[i]
            if verdict is not None:
                outcome.refusals[i] = verdict
                if queue.strict:
                    outcome.heads.setdefault(action.queue, i)
            continue
        if i in over_depth:
            outcome.refusals[i] = Refusal(
                WaitReason.DEPTH, f"queue {queue.name} holds at most {queue.depth} actions"
            )
            continue
        head = outcome.heads.get(action.queue)
        if head is not None:
            outcome.refusals[i] = _behind_head(problem, head)
            continue
        refusal = plan.refusal(action)
        if refusal is None:
            if plan.items_to_place(action):
                placement = plan.find_placement(action)
                if placement is not None:
                    plan.admit(action, placement)
                    continue
                refusal = room_refusal(problem, action, plan)
                outcome.contested.append(i)
            else:
                plan.admit(action, None)
                continue
        elif _placement_may_lift(problem, plan, action, refusal):
            outcome.contested.append(i)
        outcome.refusals[i] = refusal
        if queue.strict:
            outcome.heads[action.queue] = i
    return outcome


def _behind_head(problem: Problem, head: int) -> Refusal:
    action = problem.actions[head]
    queue = problem.queues[action.queue]
    return Refusal(
        WaitReason.HEAD_OF_LINE,
        f"behind {action.id} at the head of strict_fifo queue {queue.name}",
    )


def room_refusal(problem: Problem, action: ActionInfo, plan: Plan) -> Refusal:
    items = plan.items_to_place(action)
    clusters = plan.candidate_clusters(items, action.queue)
    names = ", ".join(problem.cluster_names[c] for c in clusters) or "none"
    what = "; ".join(describe_item(item, problem.dims) for item in items)
    empty = Plan(problem)
    if empty.find_placement(action) is not None:
        higher = {
            problem.queues[problem.actions[j].queue].name
            for j in plan.admitted
            if problem.queues[problem.actions[j].queue].priority
            > problem.queues[action.queue].priority
        }
        if higher:
            return Refusal(
                WaitReason.LOWER_PRIORITY,
                f"room in clusters {names} went to higher-priority queues"
                f" {', '.join(sorted(higher))} this tick; needs {what}",
            )
    return Refusal(WaitReason.CLUSTER_ROOM, f"no room now in clusters {names} for {what}")


def _placement_may_lift(problem: Problem, plan: Plan, action: ActionInfo, refusal: Refusal) -> bool:
    """A device cap charged by untyped GPUs placed this tick may clear if they move elsewhere."""
    if refusal.reason is not WaitReason.QUEUE_CAP or refusal.resource is None:
        return False
    for j, placement in plan.admitted.items():
        other = problem.actions[j]
        if other.queue != action.queue or placement is None:
            continue
        for item, (p, _) in zip(
            plan.items_to_place(other) or other.items, placement.spots, strict=False
        ):
            if item.untyped and problem.pools[p].device == refusal.resource:
                return True
    for env_index, placement in plan.env_started.items():
        env = problem.envs[env_index]
        if env.queue != action.queue:
            continue
        for item, (p, _) in zip(env.items, placement.spots, strict=True):
            if item.untyped and problem.pools[p].device == refusal.resource:
                return True
    return False


class _Decider:
    """Turns the best-fit pass into the exact lexicographic answer, contested action by action."""

    def __init__(
        self,
        problem: Problem,
        failures: dict[int, Failure],
        over_depth: set[int],
        options: TickOptions,
        started: float,
    ) -> None:
        self.problem = problem
        self.failures = failures
        self.over_depth = over_depth
        self.options = options
        self.started = started
        self.model: TickModel | None = None
        self.limit_hit = False
        self.spent = 0.0

    def run(self, plan: Plan, outcome: Outcome, phases: dict[str, float]) -> tuple[Plan, Outcome]:
        if not outcome.contested:
            return plan, outcome
        first = outcome.contested[0]
        mark = time.perf_counter()
        members = self._members(plan, outcome, first)
        self.model = TickModel(self.problem, members, self.options.seed)
        phases["build"] = time.perf_counter() - mark
        mark = time.perf_counter()
        plan, outcome = self._decide(plan, outcome, first, set(members))
        phases["solve"] = time.perf_counter() - mark
        return plan, outcome

    def _members(self, plan: Plan, outcome: Outcome, first: int) -> list[int]:
        """Everything admitted, plus every later action whose refusal is not already final.

        A refusal against the admissions made before `first` alone is final: admitting
        more can only use more of a cap or a slot. Depth is positional and final too.
        """
        before = self._ledger(plan, {i for i in plan.admitted if i < first})
        members = set(plan.admitted)
        final_heads: set[int] = set()
        for action in self.problem.actions[first:]:
            i = action.index
            if i in self.failures or i in self.over_depth or i in plan.admitted:
                continue
            if action.queue in final_heads:
                continue
            refusal = outcome.refusals.get(i)
            capped = refusal is not None and refusal.reason in (
                WaitReason.RUN_CONCURRENCY,
                WaitReason.ACTION_CONCURRENCY,
                WaitReason.QUEUE_CAP,
            )
            if capped and i not in outcome.contested and before.refusal(action) is not None:
                if self.problem.queues[action.queue].strict:
                    final_heads.add(action.queue)
                continue
            members.add(i)
        return sorted(members)

    def _decide(
        self, plan: Plan, outcome: Outcome, first: int, members: set[int]
    ) -> tuple[Plan, Outcome]:
        """Fix members in global order; a member the incumbent leaves out costs one check."""
        assert self.model is not None
        admitted = {i for i in plan.admitted if i < first}
        refused: dict[int, Refusal] = {}
        blocked: dict[int, int] = {}  # strict queue -> its refused head
        ledger = self._ledger(plan, admitted)
        infeasible_shapes: dict[tuple, list[tuple[int, ...]]] = {}
        for action in self.problem.actions[first:]:
            i = action.index
            if i not in members:
                continue
            if i in plan.admitted:
                admitted.add(i)
                ledger.admit(action, self._placement_in(plan, action, ledger))
                continue
            if self._out_of_time():
                break
            verdict = self._cheap_verdict(plan, ledger, action, blocked, infeasible_shapes)
            if verdict is None:
                budget = self.options.time_limit_s - self.spent
                mark = time.perf_counter()
                status, solution = self.model.check(admitted, i, plan, budget)
                self.spent += time.perf_counter() - mark
                if status == FeasibilityStatus.FEASIBLE:
                    assert solution is not None
                    admitted.add(i)
                    plan = solution
                    # Extend the new placement with a best-fit pass: a fresh incumbent.
                    best_fit_pass(
                        self.problem,
                        plan,
                        self.failures,
                        self.over_depth,
                        {**refused, **{j: None for j in admitted}},
                    )
                    ledger = self._ledger(plan, admitted)
                    continue
                if status == FeasibilityStatus.UNKNOWN:
                    self.limit_hit = True
                    verdict = Refusal(
                        WaitReason.SOLVER_LIMIT,
                        "the tick's time limit ran out before room for it could be proven",
                    )
                else:
                    verdict = ledger.refusal(action) or room_refusal(self.problem, action, ledger)
                    shape = _shape(action)
                    if shape is not None:
                        infeasible_shapes.setdefault(shape[0], []).append(shape[1])
            refused[i] = verdict
            if self.problem.queues[action.queue].strict:
                blocked.setdefault(action.queue, i)
        # Members left undecided when time ran out keep the incumbent's verdicts.
        final = best_fit_pass(
            self.problem,
            plan,
            self.failures,
            self.over_depth,
            {**refused, **{j: None for j in plan.admitted}},
        )
        return plan, Outcome(final.refusals, outcome.contested, final.heads)

    def _cheap_verdict(
        self,
        plan: Plan,
        ledger: Plan,
        action: ActionInfo,
        blocked: dict[int, int],
        infeasible_shapes: dict[tuple, list[tuple[int, ...]]],
    ) -> Refusal | None:
        """A refusal provable without the model, or None when the model must be asked."""
        if action.queue in blocked:
            return _behind_head(self.problem, blocked[action.queue])
        refusal = ledger.refusal(action)
        if refusal is not None and not _placement_may_lift(self.problem, ledger, action, refusal):
            return refusal
        shape = _shape(action)
        if shape is not None and _dominated(infeasible_shapes.get(shape[0], []), shape[1]):
            return refusal or room_refusal(self.problem, action, ledger)
        return None

    def _ledger(self, plan: Plan, admitted: set[int]) -> Plan:
        """Usage of the decided admissions only, placed where the incumbent has them."""
        ledger = Plan(self.problem)
        for j in sorted(admitted):
            action = self.problem.actions[j]
            ledger.admit(action, self._placement_in(plan, action, ledger))
        return ledger

    @staticmethod
    def _placement_in(plan: Plan, action: ActionInfo, ledger: Plan):  # -> Placement | None
        placement = plan.admitted.get(action.index)
        if placement is None and ledger.starts_env(action):
            placement = plan.env_started.get(action.env)  # type: ignore[arg-type]
        return placement

    def _out_of_time(self) -> bool:
        wall = time.perf_counter() - self.started
        if self.spent >= self.options.time_limit_s or wall >= 2 * self.options.time_limit_s:
            self.limit_hit = True
            return True
        return False


def _shape(action: ActionInfo) -> tuple[tuple, tuple] | None:
    """A key under which a larger request of the same kind cannot fit where a smaller did not."""
    if action.env is not None:
        return None
    key = (
        action.queue,
        tuple(
            (item.device, item.untyped, tuple(sorted((c, tuple(p)) for c, p in item.pools.items())))
            for item in action.items
        ),
    )
    return key, tuple(int(v) for item in action.items for v in item.request)


def _dominated(smaller_failures: list[tuple], request: tuple) -> bool:
    return any(
        all(r >= s for r, s in zip(request, small, strict=True)) for small in smaller_failures
    )
