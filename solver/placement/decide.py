"""Turn the best-fit pass into the exact answer: contested actions decided in global order.

The tick's answer is the lexicographic optimum of admissions in global order.
Admissions are "downward closed" (dropping one never breaks the others), so that
optimum is the walk down the line that admits an action exactly when it can be
placed together with every admission decided before it. The best-fit pass
already proves most admissions (it found a placement) and every refusal for a
cap or a concurrency limit (placement-free and exact). What is left are the
contested actions best-fit could not place: for each, in order, a necessary
bound may refuse it at once, and otherwise a CP-SAT model in which every decided
admission sharing its nodes may move answers whether it fits. A yes moves those
admissions to the model's placement, and the walk goes on with best-fit from there.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from models.resources import EMPTY, ResourceKind
from models.result import WaitReason
from solver.placement import closure
from solver.placement.best_fit import (
    NO_ROOM,
    PassVerdicts,
    PassWords,
    behind_head,
    placement_may_lift,
)
from solver.placement.bounds import RoomBounds
from solver.placement.cp_model import Feasibility, PlacementModel, Scope, Unit
from solver.placement.failfast import Failure
from solver.placement.plan import NodeAssignment, Plan, Refusal, UnitKey
from solver.placement.problem import UNBOUNDED, ActionInfo, Item, Problem
from solver.placement.repair import MovableUnits, charges_by_placement, repair

# With this many units or fewer placed this tick, every one of them may move in a check, so
# the answer is exact; above it, only the units on the nodes the action could use may move.
EXACT_NEIGHBOURHOOD_UNITS = 60
# Estimated seconds for one local check: a local refusal is unproven anyway, so a check that
# cannot find room quickly is not worth the tick's time.
LOCAL_CHECK_LIMIT_S = 0.1
# A model with more (container, node) choices than this takes longer to build than a tick
# should spend on one action; such a check is skipped and the refusal stays unproven.
MAX_MODEL_SPOTS = 40_000
# The budget counts estimated wall seconds, so a tick stays reproducible and still lasts about
# as long as its limit says: CP-SAT's own are estimated by the model (PlacementModel.solve), and
# building, written straight into the proto, takes about 1 ms per model and 1 µs per variable
# (solver/placement/cp_model.py).
BUILD_SECONDS_PER_MODEL = 1e-3
BUILD_SECONDS_PER_VARIABLE = 1e-6
# What one placement model answered (verdict, placements, estimated seconds, variables),
# by everything the model is built from and the limit it ran under (`_model_key`): CP-SAT runs
# on one worker with a fixed seed, so the same model under the same limit answers the same.
ModelAnswer = tuple[Feasibility, list[NodeAssignment], float, int]
ModelAnswers = dict[tuple, ModelAnswer]
OUT_OF_TIME = Refusal(
    WaitReason.SOLVER_LIMIT,
    "best-fit found no room, and the tick's time limit ran out before repacking could settle it",
)


class NoRoomMemo:
    """Requests that found no room this tick, each with whether that refusal was proven.

    A request no smaller, each of whose containers may use only pools its counterpart could
    use (the same device, typed or not), finds none either: room only shrinks as the tick
    admits, and a placement of it would place the smaller one at the same spots. (Proven,
    by the bounds' flows or a closed model, that one is proven too; D230.)

    `items` are what admitting the action places: its own containers, or the replicas of the
    reusable pool it starts.
    """

    def __init__(self) -> None:
        # Per kind of request: the failed requests (rows), their containers' pool sets (by
        # the id of the item's shared `pools`), and whether each refusal was proven.
        self._requests: dict[tuple, np.ndarray] = {}
        self._pools: dict[tuple, list[tuple[int, ...]]] = {}
        self._proven: dict[tuple, list[bool]] = {}
        self._sets: dict[int, frozenset[int]] = {}
        self._within: dict[tuple[tuple[int, ...], tuple[int, ...]], bool] = {}
        # What `find` worked out of a list of containers (of a queue) and answered, after how
        # many refusals of its kind: refusals are only added, so the next ask looks at the new
        # ones only. Most asks come while no refusal of their kind is known, and are answered
        # from its kind alone.
        self._asked: dict[tuple[int, int], _Asked] = {}

    def add(self, queue: int, items: list[Item], proven: bool) -> None:
        key = _kind(queue, items)
        request = np.concatenate([item.request for item in items])[None, :]
        known = self._requests.get(key)
        self._requests[key] = request if known is None else np.vstack([known, request])
        self._pools.setdefault(key, []).append(tuple(self._pool_set(item) for item in items))
        self._proven.setdefault(key, []).append(proven)

    def find(self, queue: int, items: list[Item]) -> bool | None:
        """None if no refusal covers this request, else whether one that does was proven."""
        key = (queue, id(items))
        asked = self._asked.get(key)
        if asked is None:
            asked = self._asked[key] = _Asked(items, _kind(queue, items))
        known = self._requests.get(asked.kind)
        if known is None:
            return None  # most asks, while no request of its kind has failed
        if asked.seen == len(known) or asked.found:
            return asked.found  # a proven refusal that covers it stays one
        # Pools first, from the sets' memo: most refusals of a kind were of other pools, and
        # the request is compared (in numpy) only with those that were not.
        if asked.pools is None:
            asked.pools = tuple(self._pool_set(item) for item in items)
        theirs = self._pools[asked.kind]
        rows = [
            row for row in range(asked.seen, len(known)) if self._inside(asked.pools, theirs[row])
        ]
        asked.seen = len(known)
        if rows:
            if asked.request is None:
                asked.request = np.concatenate([item.request for item in items])
            covering = np.logical_and.reduce(known[rows] <= asked.request, axis=1)
            for row in itertools.compress(rows, covering.tolist()):
                asked.found = self._proven[asked.kind][row]
                if asked.found:
                    break
        return asked.found

    def _pool_set(self, item: Item) -> int:
        # Items of one pool set share their `pools` mapping (solver.placement.problem).
        ident = id(item.pools)
        if ident not in self._sets:
            self._sets[ident] = frozenset(p for pools in item.pools.values() for p in pools)
        return ident

    def _inside(self, mine: tuple[int, ...], theirs: tuple[int, ...]) -> bool:
        """Whether each container's pool set lies within its counterpart's."""
        if mine == theirs:
            return True
        inside = self._within.get((mine, theirs))
        if inside is None:
            sets = self._sets
            inside = self._within[(mine, theirs)] = all(
                sets[a] <= sets[b] for a, b in zip(mine, theirs, strict=True)
            )
        return inside


@dataclass(slots=True)
class _Asked:
    """What NoRoomMemo.find worked out of one list of containers, and its answer so far."""

    items: list[Item]  # held, so the list's id stays its own
    kind: tuple
    pools: tuple[int, ...] | None = None  # worked out once a refusal of its kind is known
    request: np.ndarray | None = None  # and once one of those was of pools it may use
    seen: int = 0  # refusals of its kind looked at
    found: bool | None = None


@dataclass
class ModelCheckBudget:
    """Estimated seconds (see PlacementModel.solve) the tick may spend on checks.

    Only counted work is charged, so the same input stops at the same check on an idle and
    on a busy machine. `wall_guard` (a time.perf_counter() deadline, the service's setting)
    is the one exception, flagged apart: checked between checks, never inside CP-SAT.

    A proof (solver.placement.resume) walks on from the tick's own budget as it stood, and
    may spend at most up to `proof_until` of its own: a check it cannot pay for as the tick
    would grant it stops the proof (`proof_cut`), rather than run with less and answer what
    the tick would not.
    """

    time_limit_s: float
    seed: int
    wall_guard: float | None = None
    spent: float = 0.0
    limit_hit: bool = False
    wall_guard_hit: bool = False
    proof_until: float | None = None
    proof_cut: bool = False

    def exhausted(self) -> bool:
        # A check costs at least building its model; with less left, none starts.
        if not self.wall_guard_hit and self.spent + BUILD_SECONDS_PER_MODEL > self.time_limit_s:
            self.limit_hit = True
        elif (
            not self.limit_hit
            and self.wall_guard is not None
            and time.perf_counter() >= self.wall_guard
        ):
            self.wall_guard_hit = True
        return self.stopped

    @property
    def stopped(self) -> bool:
        """No further check runs: the limit, the wall guard or a proof's own allowance."""
        return self.limit_hit or self.wall_guard_hit or self.proof_cut

    def granted(self, limit_s: float, complete: bool) -> float | None:
        """The limit a check the tick grants `limit_s` runs under here, or None (and the
        proof cut) when a proof cannot pay for it. A complete search finds what it finds in
        the same deterministic time whatever its limit, so a proof may run it with less and
        take any answer; local search's batches follow its limit (PlacementModel.solve), so
        it runs with the tick's grant or not at all."""
        if self.proof_until is None:
            return limit_s
        left = self.proof_until - self.spent - BUILD_SECONDS_PER_MODEL
        if left >= limit_s:
            return limit_s
        if complete and left > 0:
            return left
        self.proof_cut = True
        return None


@dataclass
class DecideStats:
    contested: int = 0
    model_solves: int = 0
    largest_model_variables: int = 0
    unproven_refusals: int = 0
    bound_refusals: int = 0  # refusals the bounds proved without a model
    repairs: int = 0  # admissions found by moving decided units (solver.placement.repair)
    repacks: int = 0  # admissions found by repacking the action's neighbourhood (closure)
    reused_answers: int = 0  # models not solved again: the same one had answered before
    build_s: float = 0.0  # wall time building placement models
    solve_s: float = 0.0  # wall time in CP-SAT


class Decider:
    def __init__(
        self,
        problem: Problem,
        failures: dict[int, Failure],
        over_depth: set[int],
        budget: ModelCheckBudget,
        answers: ModelAnswers | None = None,
    ) -> None:
        """`answers`: models solved before, shared by the walks that may meet the same model
        again (the resumed ticks of one explanation); filled as models are solved."""
        self.problem = problem
        self.failures = failures
        self.over_depth = over_depth
        self.budget = budget
        self.answers = answers
        self.stats = DecideStats()
        self.bounds = RoomBounds(problem)
        # Requests a repair found no room for, since `ledger.moves` last changed: with only
        # more admitted since, a request no smaller is not tried again.
        self._unrepaired = NoRoomMemo()
        self._unrepaired_at = -1
        self._movable = MovableUnits(problem)
        # Per action whose turn needed more than caps, limits and best-fit (a repair, a bound
        # or a model), the budget before and after it, and whether the limit was hit then:
        # what a proof resuming this walk reads (solver.placement.resume).
        self.beyond_best_fit: dict[int, tuple[float, float, bool]] = {}
        # Per such turn that moved decided units, each unit and where it sat before: where the
        # tick's admissions were at any point of its line, for a proof that resumes there.
        self.moves: dict[int, list[tuple[UnitKey, NodeAssignment]]] = {}
        # Per turn refused for room past best-fit, the request it remembers as finding none
        # (NoRoomMemo), and whether that was proven: what a proof's memo holds there too.
        self.no_room: dict[int, tuple[int, list[Item], bool]] = {}

    def run(self, plan: Plan, outcome: PassVerdicts) -> tuple[Plan, dict[int, Refusal]]:
        """The exact plan, and the refusal of every pending action it leaves out.

        From the first contested action on, the line is walked again on a ledger of the
        decided admissions: caps and limits first, then best-fit, then the model.
        """
        refusals = dict(outcome.refusals)
        if not outcome.contested:
            return plan, refusals
        first = outcome.contested[0]
        members = self._members(plan, outcome, first)
        self.stats.contested = len(outcome.contested)
        heads = {q: h for q, h in outcome.heads.items() if h < first}
        ledger = _ledger(self.problem, plan, {i for i in plan.admitted if i < first})
        for queue, items, _ in ledger.units().values():
            self.bounds.admit(queue, items)
        shapes = NoRoomMemo()
        contested = set(outcome.contested)
        words = PassWords(self.problem, ledger)
        actions = self.problem.actions
        # Until a model admits something best-fit could not, the walk repeats the best-fit
        # pass exactly, so its admissions and refusals are taken as they are.
        replaying = True
        position = first
        runs = [usage.runs for usage in ledger.usage]
        while position < len(actions):
            if not replaying:
                # Up to the next action whose verdict needs more than caps, limits and
                # best-fit, the compiled ledger walks on its own (RoomLedger.walk_decided).
                position, admitted = ledger.room.walk_decided(
                    actions,
                    position,
                    len(actions),
                    self.problem.envs,
                    runs,
                    members,
                    refusals,
                    heads,
                    shapes,
                    words,
                    EMPTY,
                    OUT_OF_TIME if self.budget.limit_hit or self.budget.wall_guard_hit else None,
                )
                ledger.record(admitted, self.bounds.admit)
                if position == len(actions):
                    break
            action = actions[position]
            position += 1
            i = action.index
            strict = self.problem.queues[action.queue].strict
            if i not in members or (replaying and i not in contested and i not in plan.admitted):
                if i in refusals and strict:
                    heads.setdefault(action.queue, i)
                continue
            if replaying and i in plan.admitted:
                self._admit(ledger, action, placement_in(plan, action, ledger))
                continue
            refusals.pop(i, None)
            verdict = self._cheap_verdict(ledger, action, heads, shapes)
            if verdict is None:
                # While replaying, best-fit is known to fail on a contested action.
                placed = self._place(ledger, action, shapes, try_best_fit=not replaying)
                if isinstance(placed, Plan):
                    ledger = placed
                    runs = [usage.runs for usage in ledger.usage]
                    replaying = False  # from here on the ledger differs from best-fit's
                    continue
                verdict = placed
            refusals[i] = verdict
            if strict:
                heads.setdefault(action.queue, i)
        return ledger, refusals

    def decide(
        self,
        ledger: Plan,
        action: ActionInfo,
        heads: dict[int, int],
        shapes: NoRoomMemo,
    ) -> Plan | Refusal:
        """One action's turn, as the walk gives it once it differs from best-fit: the ledger
        with `action` admitted (decided admissions may have moved), or why not. For a walk
        resumed part way down the line (solver.placement.resume)."""
        verdict = self._cheap_verdict(ledger, action, heads, shapes)
        if verdict is not None:
            return verdict
        ledger.settle()  # the room of admissions the walk deferred: placing reads it
        return self._place(ledger, action, shapes, try_best_fit=True)

    def _place(
        self,
        ledger: Plan,
        action: ActionInfo,
        shapes: NoRoomMemo,
        try_best_fit: bool,
    ) -> Plan | Refusal:
        """Admit `action` into the ledger (best-fit, else the model), or say why not."""
        items = ledger.items_to_place(action)
        # A device cap that untyped GPUs may free by moving is the model's to judge.
        capped = ledger.refusal(action)
        if items and not ledger.fleet_may_hold(items):
            return capped or NO_ROOM
        best_fit = try_best_fit and items and not capped
        placement = ledger.find_placement(action) if best_fit else None
        if placement is not None or not items:
            self._admit(ledger, action, placement)
            return ledger
        spent = self.budget.spent
        verdict = self._beyond_best_fit(ledger, action, items, capped, shapes)
        self.beyond_best_fit[action.index] = (spent, self.budget.spent, self.budget.limit_hit)
        return verdict

    def _beyond_best_fit(
        self,
        ledger: Plan,
        action: ActionInfo,
        items: list[Item],
        capped: Refusal | None,
        shapes: NoRoomMemo,
    ) -> Plan | Refusal:
        """Admit `action`, which best-fit did not place, by a repair or the model, or say why
        not (what no bound or model can lift is `capped`)."""
        clusters = ledger.candidate_clusters(items, action.queue)
        if not self._may_fit(items, clusters):
            checked: Plan | Refusal = capped or NO_ROOM
            proven = True
        elif (
            not capped
            and not self.budget.exhausted()
            and self._repaired(ledger, action, items, clusters)
        ):
            return ledger
        elif self.budget.exhausted():
            # Past the time limit best-fit has the last word; "no room" is said only where a
            # bound proves it (the flows too cost time in proportion to the line: D154).
            return capped or OUT_OF_TIME
        elif self.bounds.refutes(action.queue, items):
            self.stats.bound_refusals += 1
            checked, proven = capped or NO_ROOM, True
        else:
            checked, proven = self._check(ledger, action, items, clusters, capped)
        if isinstance(checked, Refusal) and checked.reason is WaitReason.CLUSTER_ROOM:
            shapes.add(action.queue, items, proven)
            self.no_room[action.index] = (action.queue, items, proven)
        return checked

    def _repaired(
        self, ledger: Plan, action: ActionInfo, items: list[Item], clusters: list[int]
    ) -> bool:
        """Admit `action` after moving a decided unit out of its way, if that makes room
        (solver.placement.repair): counted work, with no model and no budget."""
        if ledger.moves != self._unrepaired_at:
            self._unrepaired = NoRoomMemo()  # a unit moved: room came back somewhere
            self._unrepaired_at = ledger.moves
        if self._unrepaired.find(action.queue, items) is not None:
            return False
        found = repair(
            ledger,
            action.queue,
            items,
            ledger.charge_of(action),
            clusters,
            self._movable,
        )
        if found is None:
            self._unrepaired.add(action.queue, items, proven=False)
            return False
        self.stats.repairs += 1
        for key, placement in found.moves:
            self._move(ledger, action, key, placement)
        self._admit(ledger, action, found.placement)
        return True

    def _admit(self, ledger: Plan, action: ActionInfo, placement: NodeAssignment | None) -> None:
        """Admit `action` into the ledger, and count what it places in the bounds."""
        if placement is not None:
            self.bounds.admit(action.queue, ledger.items_to_place(action))
        ledger.admit(action, placement)

    def _members(self, plan: Plan, outcome: PassVerdicts, first: int) -> set[int]:
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
        heads: dict[int, int],
        infeasible_shapes: NoRoomMemo,
    ) -> Refusal | None:
        """A refusal provable without the model, or None when the model must be asked."""
        if action.queue in heads:
            return behind_head(self.problem, heads[action.queue])
        refusal = ledger.refusal(action)
        if refusal is not None and not placement_may_lift(ledger, action, refusal):
            return refusal
        if refusal is not None:
            # Only the device caps may lift; everything else must already hold.
            hard = ledger.refusal(action, device_caps=False)
            if hard is not None:
                return hard
        items = ledger.items_to_place(action)
        proven = infeasible_shapes.find(action.queue, items) if items else None
        if proven is None:
            return None
        if not proven:
            self.stats.unproven_refusals += 1  # as unproven as the refusal it follows
        return refusal or NO_ROOM

    def _check(
        self,
        ledger: Plan,
        action: ActionInfo,
        items: list[Item],
        clusters: list[int],
        refusal: Refusal | None,
    ) -> tuple[Plan | Refusal, bool]:
        """Place `action` with the decided admissions, moving those that share its nodes.

        The ledger with `action` admitted when it fits, else why it does not (`refusal`: a
        device cap the move of untyped GPUs might have lifted); and whether that is proven.
        """
        if len(ledger.admitted) + len(ledger.env_started) <= EXACT_NEIGHBOURHOOD_UNITS:
            solution, proven = self._solve_in(ledger, action, items, None, exact=True)
            if solution is not None:
                return solution, True
            if self.budget.stopped:
                return OUT_OF_TIME, False
        else:
            neighbours = closure.neighbourhood(ledger, items, clusters)
            if self._repacked(ledger, action, items, neighbours):
                return ledger, True
            if self.budget.exhausted():
                return OUT_OF_TIME, False
            proven = True
            for c in clusters:
                scope = self._local_scope(ledger, items, c)
                # A "no" in a closed neighbourhood (none of its units can go elsewhere) is
                # a "no" for every repacking; one without room for the action as well.
                closed = self._closed(ledger, action, items, c)
                if scope is None:
                    proven = proven and closed
                    continue
                solution, exact = self._solve_in(ledger, action, items, scope, exact=closed)
                if solution is not None:
                    return solution, True
                proven = proven and exact
                if self.budget.stopped:
                    return OUT_OF_TIME, False
            if not proven:
                # The neighbourhood free to go anywhere, as the packing tried: its "yes" is
                # real, its "no" proves nothing more than the local ones.
                solution, _ = self._solve_in(ledger, action, items, None, False, neighbours)
                if solution is not None:
                    return solution, True
                if self.budget.stopped:
                    return OUT_OF_TIME, False
        if not proven:
            self.stats.unproven_refusals += 1
        return refusal or NO_ROOM, proven

    def _repacked(
        self, ledger: Plan, action: ActionInfo, items: list[Item], keys: list[UnitKey]
    ) -> bool:
        """Admit `action` after repacking the decided units on its pools (`keys`, from
        closure.neighbourhood) wherever they may go (solver.placement.closure), if that finds
        room: counted work, charged to the budget."""
        units = [Unit(key, *ledger.unit(key)) for key in keys]
        units.append(Unit(ledger.unit_key(action), action.queue, items))
        device_room = self._device_room(ledger, action, units)
        if device_room is None:
            return False
        packed, cost = closure.repack(ledger, units, device_room)
        self.budget.spent += cost
        if packed is None:
            return False
        self.stats.repacks += 1
        self._moved_and_admitted(ledger, action, units, packed.placements)
        return True

    def _closed(self, ledger: Plan, action: ActionInfo, items: list[Item], cluster: int) -> bool:
        """Whether every decided unit on the action's pools of `cluster` may only ever be
        placed on those pools, and no untyped GPU there meets a device cap (whose charge
        would then depend on where units outside move)."""
        pools = frozenset(p for item in items for p in item.pools[cluster])
        if charges_by_placement(self.problem, action.queue, items):
            return False
        keys = set().union(*(ledger.pool_units.get(p, set()) for p in pools))
        for key in keys:
            queue, unit_items, _ = ledger.unit(key)
            if charges_by_placement(self.problem, queue, unit_items):
                return False
            if not self.bounds.confined(queue, unit_items, pools):
                return False
        return True

    def _local_scope(self, ledger: Plan, items: list[Item], cluster: int) -> Scope | None:
        """The pools of one cluster the action may use, when their free room could hold it."""
        pools = sorted({p for item in items for p in item.pools[cluster]})
        room = self.problem.pools[pools[0]].room
        free = np.sum([ledger.free[p].sum(axis=0) for p in pools], axis=0)
        wanted = np.sum([item.request for item in items], axis=0)
        bounded = room < UNBOUNDED
        if (free[bounded] < wanted[bounded]).any():
            return None
        return Scope(cluster, frozenset(pools))

    def _solve_in(
        self,
        ledger: Plan,
        action: ActionInfo,
        items: list[Item],
        scope: Scope | None,
        exact: bool,
        neighbours: list[UnitKey] | None = None,
    ) -> tuple[Plan | None, bool]:
        """One model: the action plus the decided units that may move within `scope`, or
        (`neighbours`, without a scope) those units, each anywhere it may go.

        Returns the new ledger when the action fits, and whether a "no" is a proof (`exact`:
        the model's "no" answers for every repacking).
        """
        if neighbours is not None:
            units = {key: ledger.unit(key) for key in neighbours}
            movable = set(neighbours)
        elif scope is None:
            units = ledger.units()
            movable = set(units)
        else:
            keys = {key for p in scope.pools for key in ledger.pool_units.get(p, ())}
            units = {key: ledger.unit(key) for key in keys}
            movable = {
                key for key in keys if all(spot[0] in scope.pools for spot in units[key][2].spots)
            }
        free = [f.copy() for f in ledger.free]
        for key in movable:
            _, unit_items, placement = units[key]
            for item, (p, node) in zip(unit_items, placement.spots, strict=True):
                free[p][node] += item.request
        model_units = [
            Unit(key, units[key][0], units[key][1], units[key][2]) for key in sorted(movable)
        ]
        model_units.append(Unit(ledger.unit_key(action), action.queue, items))
        device_room = self._device_room(ledger, action, model_units)
        if device_room is None:
            return None, True
        if _size(model_units, ledger, scope) > MAX_MODEL_SPOTS:
            return None, False
        limit = self.budget.time_limit_s - self.budget.spent
        local = scope is not None or neighbours is not None
        if local:
            limit = min(limit, LOCAL_CHECK_LIMIT_S)
        # A "no" of a local model that is not closed proves nothing: only its "yes" is sought.
        complete = exact or not local
        granted = self.budget.granted(limit, complete)
        if granted is None:
            return None, False
        run = (granted, self.budget.seed, complete)
        status, placements, spent, variables = self._answer(
            model_units, free, ledger, device_room, scope, run
        )
        self.stats.largest_model_variables = max(self.stats.largest_model_variables, variables)
        # Building is charged by size, so the budget stays deterministic and still counts it;
        # an answer reused is charged as if the model were built and solved again.
        self.budget.spent += BUILD_SECONDS_PER_MODEL + variables * BUILD_SECONDS_PER_VARIABLE
        self.budget.spent += spent
        if status is Feasibility.FEASIBLE:
            self._moved_and_admitted(ledger, action, model_units, placements)
            return ledger, True
        if status is Feasibility.UNKNOWN and granted < limit:
            self.budget.proof_cut = True  # the tick's grant might have found an answer
        elif status is Feasibility.UNKNOWN and not local:
            self.budget.limit_hit = True
        return None, status is Feasibility.INFEASIBLE and exact

    def _moved_and_admitted(
        self,
        ledger: Plan,
        action: ActionInfo,
        units: list[Unit],
        placements: list[NodeAssignment],
    ) -> None:
        """Move the decided `units` to `placements` and admit `action` at the last one."""
        *moved, placed = placements
        for unit, placement in zip(units[:-1], moved, strict=True):
            # Most units stay where they were; moving one in place would only clear the
            # best-fit memo of requests that found no room (room did not come back).
            if placement != unit.hint:
                self._move(ledger, action, unit.key, placement)
        self._admit(ledger, action, placed)

    def _move(
        self, ledger: Plan, action: ActionInfo, key: UnitKey, placement: NodeAssignment
    ) -> None:
        """Move a decided unit to make room for `action`, and remember where it sat."""
        self.moves.setdefault(action.index, []).append((key, ledger.unit(key)[2]))
        ledger.move(key, placement)

    def _answer(
        self,
        model_units: list[Unit],
        free: list[np.ndarray],
        ledger: Plan,
        device_room: dict[tuple[int, str], int],
        scope: Scope | None,
        run: tuple[float, int, bool],
    ) -> tuple[Feasibility, list[NodeAssignment], float, int]:
        """The model's verdict, placements, estimated seconds and size: as `answers` has
        them when this very model ran so before, else built and solved (`run`: its limit in
        estimated seconds, its seed, and whether its "no" would prove anything)."""
        key = None
        if self.answers is not None:
            key = _model_key(
                self.problem, model_units, free, ledger.opened, device_room, scope, run
            )
            known = self.answers.get(key)
            if known is not None:
                self.stats.reused_answers += 1
                return known
        mark = time.perf_counter()
        model = PlacementModel(self.problem, model_units, free, ledger.opened, device_room, scope)
        self.stats.build_s += time.perf_counter() - mark
        mark = time.perf_counter()
        status, placements, spent = model.solve(*run)
        self.stats.solve_s += time.perf_counter() - mark
        self.stats.model_solves += 1
        answer = (status, placements, spent, model.num_variables)
        if key is not None and self.answers is not None:
            self.answers[key] = answer
        return answer

    def _may_fit(self, items: list[Item], clusters: list[int]) -> bool:
        """A necessary bound: every container fits some node once this tick's work is gone."""
        return any(all(self.problem.fits_base_room(item, c) for item in items) for c in clusters)

    def _device_room(
        self,
        ledger: Plan,
        action: ActionInfo,
        model_units: list[Unit],
    ) -> dict[tuple[int, str], int] | None:
        """Room left under each device cap an untyped container of the model could charge.

        None when the action's own typed request already breaks a cap: no placement helps.
        """
        room: dict[tuple[int, str], int] = {}
        queues = {u.queue for u in model_units if any(item.untyped for item in u.items)}
        queues.add(action.queue)
        charge = ledger.charge_of(action)
        for q in queues:
            queue = self.problem.queues[q]
            for device, cap in queue.caps.of_kind(ResourceKind.DEVICE).items():
                used = ledger.usage[q].held.amount(device)
                for unit in model_units:
                    if unit.queue != q or unit.hint is None:
                        continue
                    for item, (p, _) in zip(unit.items, unit.hint.spots, strict=True):
                        if item.untyped and self.problem.pools[p].device == device:
                            used -= item.gpus
                if q == action.queue:
                    used += charge.amount(device)
                if used > cap and q == action.queue and charge.amount(device):
                    return None
                room[(q, device)] = max(0, cap - used)
        return room


def _ledger(problem: Problem, plan: Plan, admitted: set[int]) -> Plan:
    """The decided admissions only, placed where `plan` has them."""
    ledger = Plan(problem)
    for j in sorted(admitted):
        action = problem.actions[j]
        ledger.admit(action, placement_in(plan, action, ledger), defer_room=True)
    ledger.settle()  # their room all at once: nothing between reads it
    return ledger


def placement_in(plan: Plan, action: ActionInfo, target: Plan) -> NodeAssignment | None:
    """Where `plan` put `action`, or its pool when `action` starts that pool in `target`."""
    placement = plan.admitted.get(action.index)
    env = target.env_to_start(action)
    if placement is None and env is not None:
        placement = plan.env_started.get(env)
    return placement


def _kind(queue: int, items: list[Item]) -> tuple:
    """Requests that may cover one another: containers of the same devices, typed or not.

    Room does not depend on the queue, except where untyped GPUs meet its device caps.
    """
    untyped = any(item.untyped for item in items)
    return (queue if untyped else None, tuple((item.device, item.untyped) for item in items))


def _model_key(
    problem: Problem,
    units: list[Unit],
    free: list[np.ndarray],
    opened: list[np.ndarray],
    device_room: dict[tuple[int, str], int],
    scope: Scope | None,
    run: tuple[float, int, bool],
) -> tuple:
    """Everything PlacementModel reads to build a model of `units`, and how it is run (the
    limit, the seed and the search): equal keys, equal models, equal answers."""
    pools: set[int] = set()
    parts: list[object] = [scope, run, tuple(sorted(device_room.items()))]
    for unit in units:
        items = []
        for item in unit.items:
            eligible = tuple(sorted((c, tuple(p)) for c, p in item.pools.items()))
            items.append((item.request.tobytes(), item.gpus, item.device, eligible))
            pools.update(p for _, eligible_pools in eligible for p in eligible_pools)
        routed = tuple(problem.queues[unit.queue].clusters)
        parts.append((unit.key, unit.queue, routed, tuple(items), unit.hint))
    for p in sorted(pools):
        if scope is None or p in scope.pools:
            pool = problem.pools[p]
            parts.append(
                (p, pool.cluster, pool.device, pool.room.tobytes(), free[p].tobytes(),
                 opened[p].tobytes())
            )  # fmt: skip
    return tuple(parts)


def _size(units: list[Unit], ledger: Plan, scope: Scope | None) -> int:
    """How many (container, node) choices a model of `units` would have, at most."""
    # Containers of one pool set share their `pools` mapping (solver.placement.problem).
    by_pools: dict[int, int] = {}
    total = 0
    for unit in units:
        for item in unit.items:
            choices = by_pools.get(id(item.pools))
            if choices is None:
                choices = by_pools[id(item.pools)] = sum(
                    len(ledger.free[p])
                    for pools in item.pools.values()
                    for p in pools
                    if scope is None or p in scope.pools
                )
            total += choices
    return total
