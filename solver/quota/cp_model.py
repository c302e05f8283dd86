"""The quota tick's CP-SAT model and the staged objectives that decide it.

Variables: admit[j] for every candidate (a queued job the tick may start), keep[r] for
every holder a preemption rule can reach (all other holders keep their instances).

Constraints, per pool (see solver.quota.problem for L, R, P, cap, U):
  usage     u = sum of kept holders' and admitted candidates' instances, per share;
  cap       a share that admits a job ends at u <= cap;
  protect   v = max(u, P) is what the share is charged: capacity it held within its
            own limit stays with it this tick even if its own higher-priority job
            displaced a bigger one, so other shares never gain from that;
  env       sum(v) <= E: the environment's maximum is never exceeded;
  reserve   sum(v of lending shares) + sum(max(0, v - L) of RESERVE shares)
                <= sum(L of lending shares) + U
            i.e. usage beyond a share's own limit (borrowing, or a limit lowered
            below use) is covered by idle capacity of LEND / LEND_AND_BORROW shares
            or by capacity no share is given, never by a RESERVE share's idle limit;
  borrow    a LEND_AND_BORROW share may end with more borrowed than it started with
            only if the pool would also be admissible with every holder still in
            place and every admission added (each share at R + its admissions): new
            borrowing uses idle capacity only, never capacity freed by a preemption;
  in-share  a holder stops while its own share admits a job only if the share has
            in-share preemption on and every job it admits in that type has a higher
            priority; a holder reachable only through in-share preemption stops only
            if a higher-priority job of its share and type starts.

Objectives, solved in stages; each stage's optimum is fixed before the next:
  1. own capacity first: admissions that do not grow their share's borrowing,
     lexicographically in the global admission order;
  2. then borrowing: the remaining jobs of LEND_AND_BORROW shares, in the same order;
  3. the victim rule, for the admissions now fixed:
     a. fewest preempted instances (free exactly what is needed), then
     b. keep holders lexicographically in protection order: higher priority first,
        then more work done (instance-seconds held), then earlier arrival; so the
        victims are the lowest priority, and among equals the least work lost.
A lexicographic stage runs in blocks with weights 2^k, each block fixed before the next
(see OBJECTIVE_BITS for the size). Pools share no variable, so one solve takes the next
block of every pool: the sum of independent lexicographic objectives is maximised exactly
by maximising each. Before a block is formed, a job a necessary bound already refuses (its
share's cap or the environment is full with what is fixed) is fixed out without a solve.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ortools.sat.python import cp_model_helper

if TYPE_CHECKING:
    # OR-Tools' model API imports pandas (0.2 s at start-up) and only a quota solve needs
    # it: the solves import it where they build and run a model, not every tick's import.
    from ortools.sat.python import cp_model

from models.errors import InternalError
from solver.quota.problem import Candidate, Holder, Pool, QuotaProblem, Slot

# A lexicographic solve's objective stays below 2^OBJECTIVE_BITS, where a double still tells
# every integer apart: CP-SAT checks bounds and gaps in floating point, and with 60-literal
# blocks (objective near 2^60) it declared OPTIMAL a solution a lower-ranked job had bettered.
OBJECTIVE_BITS = 50
SlotKey = tuple[str, str, str]  # (job queue, instance type, share)
T = TypeVar("T", Candidate, Holder)


@dataclass
class QuotaSolveBudget:
    """Deterministic solver time for the whole tick: the same input stops at the same solve
    on an idle and on a busy machine. `wall_guard` (the service's, a time.perf_counter()
    deadline) only keeps a further solve from starting, and is flagged apart."""

    time_limit_s: float
    seed: int
    wall_guard: float | None = None
    started: float = field(default_factory=time.perf_counter)
    spent: float = 0.0
    limit_hit: bool = False
    wall_guard_hit: bool = False

    def remaining(self) -> float:
        """Deterministic seconds left; 0 once the wall-clock guard has passed."""
        if self.wall_guard is not None and time.perf_counter() >= self.wall_guard:
            self.wall_guard_hit = True
            return 0.0
        return self.time_limit_s - self.spent


@dataclass
class Decision:
    admitted: set[str]
    kept: set[str]  # eligible holders that keep their instances
    solves: int = 0
    variables: int = 0


class QuotaModel:
    def __init__(self, problem: QuotaProblem) -> None:
        self.problem = problem
        from ortools.sat.python import cp_model

        self.model = cp_model.CpModel()
        self.admit: dict[str, cp_model.IntVar] = {}
        self.keep: dict[str, cp_model.IntVar] = {}
        self.own: dict[str, cp_model.IntVar] = {}  # candidate -> "admitted on own capacity"
        self._new: dict[SlotKey, list[Candidate]] = defaultdict(list)
        self._held: dict[SlotKey, list[Holder]] = defaultdict(list)
        for c in problem.candidates:
            self._new[(*c.pool, c.job.share)].append(c)
            self.admit[c.job.id] = self.model.new_bool_var(f"admit[{c.job.id}]")
        # Instances of holders no rule can reach: they stay whatever the model decides.
        self.fixed_holding: dict[SlotKey, int] = defaultdict(int)
        for h in problem.holders:
            self._held[(*h.pool, h.job.share)].append(h)
            if h.eligible:
                self.keep[h.job.id] = self.model.new_bool_var(f"keep[{h.job.id}]")
            else:
                self.fixed_holding[(*h.pool, h.job.share)] += h.job.count
        for key, pool in problem.pools.items():
            self._pool(key, pool)

    def _pool(self, key: tuple[str, str], pool: Pool) -> None:
        usage: dict[str, cp_model.LinearExprT] = {}
        charged: dict[str, cp_model.LinearExprT] = {}
        for name, slot in pool.slots.items():
            new = self._new.get((*key, name), [])
            held = self._held.get((*key, name), [])
            usage[name] = self._usage(held, new)
            admits = self._admission_cap(usage[name], slot, new)
            self._in_share(slot, held, new, admits)
            charged[name] = self._protection(usage[name], slot, bound=slot.placed + _sum(new))
        self._environment(pool, list(charged.values()))
        self._reserve_never_lent(pool, charged)
        more = self._borrowing_takes_only_idle(key, pool, usage)
        self._own_capacity(key, pool, more)

    def _usage(self, held: list[Holder], new: list[Candidate]) -> cp_model.LinearExprT:
        """Instances a share holds after the tick in one pool."""
        fixed = sum(h.job.count for h in held if not h.eligible)  # = fixed_holding of the slot
        kept = [h.job.count * self.keep[h.job.id] for h in held if h.eligible]
        admitted = [c.job.count * self.admit[c.job.id] for c in new]
        return fixed + sum(kept) + sum(admitted)

    def _admission_cap(
        self, usage: cp_model.LinearExprT, slot: Slot, new: list[Candidate]
    ) -> cp_model.IntVar | None:
        """A share that admits anything ends within its cap; returns "admits anything"."""
        if not new:
            return None
        admits = self.model.new_bool_var(f"admits[{slot.share.name}]")
        for c in new:
            self.model.add_implication(self.admit[c.job.id], admits)
        self.model.add(usage <= slot.cap).only_enforce_if(admits)
        return admits

    def _in_share(
        self,
        slot: Slot,
        held: list[Holder],
        new: list[Candidate],
        admits: cp_model.IntVar | None,
    ) -> None:
        """Holders leave for their own share's jobs only by in-share preemption, for higher ones."""
        for h in held:
            if not h.eligible or admits is None:
                continue
            keep = self.keep[h.job.id]
            if not slot.share.in_share_preemption:
                self.model.add_implication(admits, keep)
                continue
            for c in new:
                if c.job.priority <= h.job.priority:
                    self.model.add_implication(self.admit[c.job.id], keep)
            if h.in_share_only:
                higher = [self.admit[c.job.id] for c in new if c.job.priority > h.job.priority]
                self.model.add_bool_or([*higher, keep])

    def _protection(
        self, usage: cp_model.LinearExprT, slot: Slot, bound: int
    ) -> cp_model.LinearExprT:
        """v = max(u, P); v is only ever bounded from above, so v >= u and v >= P are exact."""
        if slot.protected == 0:
            return usage
        charged = self.model.new_int_var(slot.protected, max(slot.protected, bound), "charged")
        self.model.add(charged >= usage)
        return charged

    def _environment(self, pool: Pool, charged: list[cp_model.LinearExprT]) -> None:
        """The environment's maximum for the instance type is never exceeded."""
        self.model.add(sum(charged) <= pool.maximum)

    def _reserve_never_lent(self, pool: Pool, charged: Mapping[str, cp_model.LinearExprT]) -> None:
        """Use beyond own limits is covered by lenders' idle limits and unassigned capacity."""
        self.model.add(self._sharing_load(pool, charged) <= pool.lendable)

    def _sharing_load(
        self, pool: Pool, charged: Mapping[str, cp_model.LinearExprT]
    ) -> cp_model.LinearExprT:
        """Lending shares' whole charge plus RESERVE shares' charge beyond their limits."""
        load: list[cp_model.LinearExprT] = []
        for name, slot in pool.slots.items():
            if slot.share.strategy.lends:
                load.append(charged[name])
            else:
                beyond = self.model.new_int_var(0, pool.maximum + slot.placed, "beyond")
                self.model.add(beyond >= charged[name] - slot.limit)
                load.append(beyond)
        return sum(load)

    def _borrowing_takes_only_idle(
        self, key: tuple[str, str], pool: Pool, usage: dict[str, cp_model.LinearExprT]
    ) -> dict[str, cp_model.IntVar]:
        """More borrowing only where it fits next to every holder; returns "borrows more".

        The check is on holders plus admissions, not on the usage after preemptions: with
        usage, a needless in-share swap (a job that fits its share's idle limit displacing a
        lower one) would hand the share's idle instance to a borrower.
        """
        more: dict[str, cp_model.IntVar] = {}
        for name, slot in pool.slots.items():
            if slot.share.strategy.borrows and self._new.get((*key, name)):
                more[name] = self.model.new_bool_var(f"borrows_more[{name}]")
                self.model.add(usage[name] <= slot.limit + slot.borrowed_before).only_enforce_if(
                    more[name].Not()
                )
        if not more:
            return more
        grows = self.model.new_bool_var("grows")
        for literal in more.values():
            self.model.add_implication(literal, grows)
        # Every holder of the tick's start still in place, and every admission added: the
        # state new borrowing must fit in, so it never uses capacity a preemption freed.
        undisturbed = {
            name: slot.placed
            + sum(c.job.count * self.admit[c.job.id] for c in self._new.get((*key, name), []))
            for name, slot in pool.slots.items()
        }
        self.model.add(sum(undisturbed.values()) <= pool.maximum).only_enforce_if(grows)
        load = self._sharing_load(pool, undisturbed)
        self.model.add(load <= pool.lendable).only_enforce_if(grows)
        return more

    def _own_capacity(
        self, key: tuple[str, str], pool: Pool, more: dict[str, cp_model.IntVar]
    ) -> None:
        """own[j]: j is admitted and its share borrows no more than it did."""
        for name in pool.slots:
            for c in self._new.get((*key, name), []):
                admit = self.admit[c.job.id]
                if name not in more:
                    self.own[c.job.id] = admit  # a share that cannot borrow more runs on its own
                    continue
                own = self.model.new_bool_var(f"own[{c.job.id}]")
                self.model.add_implication(own, admit)
                self.model.add_implication(own, more[name].Not())
                self.own[c.job.id] = own

    @property
    def num_variables(self) -> int:
        return len(self.model.proto.variables)

    def decide(self, budget: QuotaSolveBudget) -> Decision:
        stages = _Stages(self, budget)
        order = self.problem.candidates  # already in admission order
        stages.admissions(order, on_own_capacity=True)
        borrowing = [
            c
            for c in order
            if self.own[c.job.id] is not self.admit[c.job.id] and c.job.id not in stages.admitted
        ]
        stages.admissions(borrowing, on_own_capacity=False)
        eligible = [h for h in self.problem.holders if h.eligible]
        stages.fewest_preempted_instances(eligible)
        protection: dict[tuple[str, str], list[Holder]] = defaultdict(list)
        for h in sorted(eligible, key=self.problem.protection):
            protection[h.pool].append(h)
        stages.lexicographic(protection, lambda h: self.keep[h.job.id], stages.settle_keep)
        return stages.decision()

    def slot_of(self, c: Candidate) -> tuple[Pool, SlotKey]:
        return self.problem.pools[c.pool], (*c.pool, c.job.share)


class _Stages:
    """Solve, fix the optimum, hint it, solve the next objective (OR-Tools' multi-stage way)."""

    def __init__(self, owner: QuotaModel, budget: QuotaSolveBudget) -> None:
        self.owner = owner
        self.model = owner.model
        self.budget = budget
        borrowers_own = [
            owner.own[j] for j, admit in owner.admit.items() if owner.own[j] is not admit
        ]
        self.decisions = [*owner.admit.values(), *owner.keep.values(), *borrowers_own]
        # The first hint: nothing new starts, nobody is stopped.
        self.values: dict[int, int] = {v.index: 0 for v in (*owner.admit.values(), *borrowers_own)}
        self.values.update({v.index: 1 for v in owner.keep.values()})
        self.solved = False
        self.solves = 0
        self.stopped = False
        self.admitted: set[str] = set()  # candidates whose admission is fixed
        self._admitted_in: dict[SlotKey, int] = defaultdict(int)  # their instances per slot

    def value(self, var: cp_model.IntVar) -> int:
        return self.values[var.index]

    def _solve(self, objective: cp_model.LinearExprT, maximize: bool) -> bool:
        if self.stopped:
            return False
        deterministic = self.budget.remaining()
        if deterministic <= 0:
            self.stopped = True
            self.budget.limit_hit = not self.budget.wall_guard_hit
            return False
        self.model.clear_hints()
        for var in self.decisions:
            self.model.add_hint(var, self.values[var.index])
        if maximize:
            self.model.maximize(objective)
        else:
            self.model.minimize(objective)
        from ortools.sat.python import cp_model

        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1  # deterministic
        solver.parameters.random_seed = self.budget.seed
        solver.parameters.max_deterministic_time = deterministic
        status = solver.solve(self.model)
        self.solves += 1
        self.budget.spent += solver.deterministic_time
        if status in (cp_model_helper.INFEASIBLE, cp_model_helper.MODEL_INVALID):
            # "Admit nothing, preempt every eligible holder" always satisfies the model.
            raise InternalError(f"quota model {solver.status_name(status)}")
        if status not in (cp_model_helper.OPTIMAL, cp_model_helper.FEASIBLE):
            self.budget.limit_hit = self.stopped = True
            return False
        if status == cp_model_helper.FEASIBLE:
            self.budget.limit_hit = True
        self.values = {var.index: solver.value(var) for var in self.decisions}
        self.solved = True
        return True

    def settle_keep(self, h: Holder) -> None:
        keep = self.owner.keep[h.job.id]
        self.model.add(keep == self.value(keep))

    def lexicographic(
        self,
        lines: dict[tuple[str, str], list[T]],
        literal: Callable[[T], cp_model.IntVar],
        settle: Callable[[T], None],
        refused: Callable[[T], bool] | None = None,
    ) -> None:
        """Each item's literal as high as it can be, given every item before it in its pool."""
        size = OBJECTIVE_BITS - max(1, len(lines)).bit_length()  # all pools' blocks together
        pending = {pool: iter(items) for pool, items in lines.items()}
        while not self.stopped:
            blocks: list[list[T]] = []
            for items in pending.values():
                block: list[T] = []
                for item in items:
                    if refused is not None and refused(item):
                        self.model.add(literal(item) == 0)
                        self.values[literal(item).index] = 0
                        continue
                    block.append(item)
                    if len(block) == size:
                        break
                if block:
                    blocks.append(block)
            if not blocks:
                return
            in_doubt = [
                b for b in blocks if not (self.solved and all(self.value(literal(i)) for i in b))
            ]
            objective = sum(
                (1 << (len(b) - 1 - k)) * literal(item)
                for b in in_doubt
                for k, item in enumerate(b)
            )
            if in_doubt and not self._solve(objective, True):
                return
            for block in blocks:
                for item in block:
                    settle(item)

    def admissions(self, order: list[Candidate], *, on_own_capacity: bool) -> None:
        """Stage 1 (own capacity) or 2 (borrowing): admit lexicographically in `order`."""
        literals = self.owner.own if on_own_capacity else self.owner.admit
        lines: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
        for c in order:
            lines[c.pool].append(c)
        self.lexicographic(
            lines,
            lambda c: literals[c.job.id],
            lambda c: self._settle(c, literals[c.job.id]),
            lambda c: self._refused(c, on_own_capacity),
        )

    def _settle(self, c: Candidate, literal: cp_model.IntVar) -> None:
        """Fix one decided admission; after stage 1 a borrower's refusal stays open."""
        admit = self.owner.admit[c.job.id]
        if self.value(literal):
            self.model.add(admit == 1)
            self.admitted.add(c.job.id)
            _, key = self.owner.slot_of(c)
            self._admitted_in[key] += c.job.count
        elif literal is admit:
            self.model.add(admit == 0)
        else:
            self.model.add(literal == 0)

    def _refused(self, c: Candidate, on_own_capacity: bool) -> bool:
        """A necessary condition for admitting `c` fails, given the admissions fixed so far."""
        pool, _ = self.owner.slot_of(c)
        slot = pool.slots[c.job.share]
        surely = {
            name: self.owner.fixed_holding[(*c.pool, name)] + self._admitted_in[(*c.pool, name)]
            for name in pool.slots
        }
        room = slot.cap
        if on_own_capacity and slot.share.strategy.borrows:
            room = min(room, slot.limit + slot.borrowed_before)  # own: borrowing does not grow
        if surely[c.job.share] + c.job.count > room:
            return True
        surely[c.job.share] += c.job.count
        charged = sum(max(pool.slots[n].protected, u) for n, u in surely.items())
        if charged > pool.maximum:
            return True
        if on_own_capacity:
            return False
        # Stage 2 admits only by borrowing more, which must fit next to every holder.
        undisturbed = sum(s.placed + self._admitted_in[(*c.pool, n)] for n, s in pool.slots.items())
        return undisturbed + c.job.count > pool.maximum

    def fewest_preempted_instances(self, holders: list[Holder]) -> None:
        keeps = [(h.job.count, self.owner.keep[h.job.id]) for h in holders]
        if self.solved and all(self.value(keep) for _, keep in keeps):
            return  # nobody is preempted: already the minimum
        lost = sum(count * (1 - keep) for count, keep in keeps)
        if keeps and self._solve(lost, False):
            self.model.add(lost <= sum(count * (1 - self.value(keep)) for count, keep in keeps))

    def decision(self) -> Decision:
        admitted = {j for j, var in self.owner.admit.items() if self.value(var)}
        kept = {j for j, var in self.owner.keep.items() if self.value(var)}
        return Decision(admitted, kept, self.solves, self.owner.num_variables)


def _sum(new: list[Candidate]) -> int:
    return sum(c.job.count for c in new)
