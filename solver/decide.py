"""Turn the best-fit pass into the exact answer: contested actions decided in global order.

The tick's answer is the lexicographic optimum of admissions in global order.
Admissions are "downward closed" (dropping one never breaks the others), so that
optimum is the walk down the line that admits an action exactly when it can be
placed together with every admission decided before it. The best-fit pass
already proves most admissions (it found a placement) and every refusal for a
cap or a concurrency limit (placement-free and exact). What is left are the
contested actions best-fit could not place: for each, in order, a necessary
bound may refuse it at once, and otherwise a CP-SAT model in which every decided
admission sharing its nodes may move answers whether it fits. A yes gives a new
placement, which a best-fit pass extends down the line again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from models.result import WaitReason
from solver.failfast import Failure
from solver.model import Feasibility, PlacementModel, Unit
from solver.passes import (
    Outcome,
    behind_head,
    best_fit_pass,
    placement_may_lift,
    room_refusal,
)
from solver.plan import Placement, Plan, Refusal, UnitKey
from solver.problem import ActionInfo, Problem

# With this many units or fewer placed this tick, every one of them may move in a check, so
# the answer is exact; above it, only the units on the nodes the action could use may move.
EXACT_NEIGHBOURHOOD_UNITS = 60


@dataclass
class Budget:
    time_limit_s: float
    seed: int
    started: float
    spent: float = 0.0
    limit_hit: bool = False

    def exhausted(self) -> bool:
        wall = time.perf_counter() - self.started
        if self.spent >= self.time_limit_s or wall >= 2 * self.time_limit_s:
            self.limit_hit = True
        return self.limit_hit


@dataclass
class DecideStats:
    contested: int = 0
    model_solves: int = 0
    largest_model_variables: int = 0
    unproven_refusals: int = 0


class Decider:
    def __init__(
        self,
        problem: Problem,
        failures: dict[int, Failure],
        over_depth: set[int],
        budget: Budget,
    ) -> None:
        self.problem = problem
        self.failures = failures
        self.over_depth = over_depth
        self.budget = budget
        self.stats = DecideStats()
        self._room_bound_cache: dict[tuple[int, bytes], bool] = {}

    def run(self, plan: Plan, outcome: Outcome) -> tuple[Plan, Outcome]:
        if not outcome.contested:
            return plan, outcome
        first = outcome.contested[0]
        members = self._members(plan, outcome, first)
        self.stats.contested = len(outcome.contested)
        admitted = {i for i in plan.admitted if i < first}
        refused: dict[int, Refusal] = {}
        blocked: dict[int, int] = {}  # strict queue -> its refused head
        ledger = _ledger(self.problem, plan, admitted)
        infeasible_shapes: dict[tuple, list[tuple[int, ...]]] = {}
        for action in self.problem.actions[first:]:
            i = action.index
            if i not in members:
                continue
            if i in plan.admitted:
                admitted.add(i)
                ledger.admit(action, _placement_in(plan, action, ledger))
                continue
            if self.budget.exhausted():
                break
            verdict = self._cheap_verdict(ledger, action, blocked, infeasible_shapes)
            if verdict is None:
                solution, verdict = self._check(ledger, action)
                if solution is not None:
                    admitted.add(i)
                    plan = solution
                    # The new placement may leave room best-fit can use further down the line.
                    best_fit_pass(
                        self.problem,
                        plan,
                        self.failures,
                        self.over_depth,
                        {**refused, **dict.fromkeys(admitted)},
                    )
                    ledger = _ledger(self.problem, plan, admitted)
                    continue
                shape = _shape(action)
                if shape is not None and verdict.reason is WaitReason.CLUSTER_ROOM:
                    infeasible_shapes.setdefault(shape[0], []).append(shape[1])
            refused[i] = verdict
            if self.problem.queues[action.queue].strict:
                blocked.setdefault(action.queue, i)
        # Actions left undecided when time ran out keep the incumbent's verdicts.
        final = best_fit_pass(
            self.problem,
            plan,
            self.failures,
            self.over_depth,
            {**refused, **dict.fromkeys(plan.admitted)},
        )
        return plan, Outcome(final.refusals, outcome.contested, final.heads)

    def _members(self, plan: Plan, outcome: Outcome, first: int) -> set[int]:
        """Every admission, and every later action whose refusal is not already final.

        A cap or concurrency refusal against the admissions made before `first` alone
        is final: more admissions only use more of a cap or a slot. Depth is final too.
        """
        before = _ledger(self.problem, plan, {i for i in plan.admitted if i < first})
        contested = set(outcome.contested)
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
            if capped and i not in contested and before.refusal(action) is not None:
                if self.problem.queues[action.queue].strict:
                    final_heads.add(action.queue)
                continue
            members.add(i)
        return members

    def _cheap_verdict(
        self,
        ledger: Plan,
        action: ActionInfo,
        blocked: dict[int, int],
        infeasible_shapes: dict[tuple, list[tuple[int, ...]]],
    ) -> Refusal | None:
        """A refusal provable without the model, or None when the model must be asked."""
        if action.queue in blocked:
            return behind_head(self.problem, blocked[action.queue])
        refusal = ledger.refusal(action)
        if refusal is not None and not placement_may_lift(self.problem, ledger, action, refusal):
            return refusal
        shape = _shape(action)
        if shape is not None and _dominated(infeasible_shapes.get(shape[0], []), shape[1]):
            return refusal or room_refusal(self.problem, action, ledger)
        return None

    def _check(self, ledger: Plan, action: ActionInfo) -> tuple[Plan | None, Refusal]:
        """Place `action` with the decided admissions, moving those that share its nodes."""
        items = ledger.items_to_place(action)
        refusal = ledger.refusal(action)
        if not items:  # joins a pool that is up: nothing to place
            if refusal is None:
                solution = ledger.copy()
                solution.admit(action, None)
                return solution, refusal  # type: ignore[return-value]
            return None, refusal
        clusters = ledger.candidate_clusters(items, action.queue)
        reachable = {p for item in items for c in clusters for p in item.pools[c]}
        if not self._may_fit(items, clusters):
            return None, refusal or room_refusal(self.problem, action, ledger)
        units = ledger.units()
        exact = len(units) <= EXACT_NEIGHBOURHOOD_UNITS
        movable = (
            set(units)
            if exact
            else {key for p in reachable for key in ledger.pool_units.get(p, ())}
        )
        free = [f.copy() for f in ledger.free]
        for key in movable:
            _, unit_items, placement = units[key]
            for item, (p, node) in zip(unit_items, placement.spots, strict=True):
                free[p][node] += item.request
        model_units = [
            Unit(key, units[key][0], units[key][1], units[key][2]) for key in sorted(movable)
        ]
        candidate_key: UnitKey = (
            ("env", action.env) if ledger.starts_env(action) else ("action", action.index)  # type: ignore[assignment]
        )
        model_units.append(Unit(candidate_key, action.queue, items))
        device_room = self._device_room(ledger, action, model_units, units)
        if device_room is None:
            return None, refusal or room_refusal(self.problem, action, ledger)
        model = PlacementModel(self.problem, model_units, free, ledger.opened, device_room)
        self.stats.largest_model_variables = max(
            self.stats.largest_model_variables, model.num_variables
        )
        mark = time.perf_counter()
        status, placements = model.solve(
            self.budget.time_limit_s - self.budget.spent, self.budget.seed
        )
        self.budget.spent += time.perf_counter() - mark
        self.stats.model_solves += 1
        if status is Feasibility.FEASIBLE:
            moved = {
                unit.key: placement for unit, placement in zip(model_units, placements, strict=True)
            }
            return self._replan(ledger, action, moved), refusal  # type: ignore[return-value]
        if status is Feasibility.UNKNOWN:
            self.budget.limit_hit = True
            return None, Refusal(
                WaitReason.SOLVER_LIMIT,
                "the tick's time limit ran out before room for it could be proven",
            )
        if not exact:
            self.stats.unproven_refusals += 1
        return None, refusal or room_refusal(self.problem, action, ledger)

    def _may_fit(self, items: list, clusters: list[int]) -> bool:
        """A necessary bound: every container fits some node once this tick's work is gone."""
        return any(all(self._fits_some_node(item, c) for item in items) for c in clusters)

    def _fits_some_node(self, item, cluster: int) -> bool:
        for p in item.pools[cluster]:
            key = (p, item.request.tobytes())
            known = self._room_bound_cache.get(key)
            if known is None:
                pool = self.problem.pools[p]
                known = bool(((pool.room - pool.used) >= item.request).all(axis=1).any())
                self._room_bound_cache[key] = known
            if known:
                return True
        return False

    def _device_room(
        self,
        ledger: Plan,
        action: ActionInfo,
        model_units: list[Unit],
        units: dict[UnitKey, tuple[int, list, Placement]],
    ) -> dict[tuple[int, str], int] | None:
        """Room left under each device cap an untyped container of the model could charge.

        None when the action's own typed request already breaks a cap: no placement helps.
        """
        room: dict[tuple[int, str], int] = {}
        queues = {u.queue for u in model_units if any(item.untyped for item in u.items)}
        charge = ledger.charge_of(action)
        for q in queues:
            queue = self.problem.queues[q]
            for device, cap in queue.device_caps.items():
                used = ledger.usage[q].device_used.get(device, 0)
                for unit in model_units:
                    if unit.queue != q or unit.hint is None:
                        continue
                    for item, (p, _) in zip(unit.items, unit.hint.spots, strict=True):
                        if item.untyped and self.problem.pools[p].device == device:
                            used -= item.gpus
                if q == action.queue:
                    used += charge.devices.get(device, 0)
                if used > cap and q == action.queue and charge.devices.get(device, 0):
                    return None
                room[(q, device)] = max(0, cap - used)
        return room

    def _replan(self, ledger: Plan, action: ActionInfo, moved: dict[UnitKey, Placement]) -> Plan:
        """The decided admissions at their (possibly moved) places, plus `action`."""
        plan = Plan(self.problem)
        for i in sorted(ledger.admitted):
            other = self.problem.actions[i]
            key: UnitKey = ("env", other.env) if plan.starts_env(other) else ("action", i)  # type: ignore[assignment]
            plan.admit(other, moved.get(key, _placement_in(ledger, other, plan)))
        key = ("env", action.env) if plan.starts_env(action) else ("action", action.index)  # type: ignore[assignment]
        plan.admit(action, moved[key])
        return plan


def _ledger(problem: Problem, plan: Plan, admitted: set[int]) -> Plan:
    """The decided admissions only, placed where `plan` has them."""
    ledger = Plan(problem)
    for j in sorted(admitted):
        action = problem.actions[j]
        ledger.admit(action, _placement_in(plan, action, ledger))
    return ledger


def _placement_in(plan: Plan, action: ActionInfo, target: Plan) -> Placement | None:
    """Where `plan` put `action`, or its pool when `action` starts that pool in `target`."""
    placement = plan.admitted.get(action.index)
    if placement is None and target.starts_env(action):
        placement = plan.env_started.get(action.env)  # type: ignore[arg-type]
    return placement


def _shape(action: ActionInfo) -> tuple[tuple, tuple[int, ...]] | None:
    """A key under which a request no smaller than one that found no room finds none either."""
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


def _dominated(smaller_failures: list[tuple[int, ...]], request: tuple[int, ...]) -> bool:
    return any(
        all(r >= s for r, s in zip(request, small, strict=True)) for small in smaller_failures
    )
