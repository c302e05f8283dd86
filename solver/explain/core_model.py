"""The explanation model: could this action be admitted now, and if not, which limits say no?

One small CP-SAT model per explanation, over the frozen world of solver.explain.frozen:
the action's containers choose nodes (or, where a pool's room is relaxed, extra nodes
of the pool's shape) in one cluster its queue routes to; everything ahead of it is
fixed where the tick put it. Each limit that could keep it out has an assumption
literal that enforces it:

- the line: depth, the blocked head of a strict_fifo queue, run and action concurrency;
- the queue's caps it adds to: named resources, device types (with untyped GPUs
  charged to the device they land on) and untyped GPUs;
- room, one literal per node pool: when it holds, the pool has only the nodes it can
  scale to, with what is left on them; relaxed, the pool may add nodes.

Limits that do not depend on placement are constants (their literal is forced false
when violated). `minimal_core` asks CP-SAT for sufficient assumptions for
infeasibility (one worker, as it requires; presolve off, so the core only holds
assumption literals) and shrinks them by solving without each member in turn.
`cheapest_fix` maximises the weighted number of limits kept, so the relaxed ones are a
minimal correction set: relaxing all of them, and no fewer, lets the action in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from math import gcd

import numpy as np
from ortools.sat.python import cp_model

from models.errors import Unavailable
from models.resources import ResourceKind, kind_of
from solver.explain.frozen import Frozen
from solver.placement.problem import UNBOUNDED, Item

# Each solve of these models takes milliseconds; the limit only guards against a pathology. In
# CP-SAT's deterministic seconds, so an explanation never depends on the machine's load.
SOLVE_LIMIT_DETERMINISTIC = 1.0


class Limit(IntEnum):
    """Assumption families, by severity: a shrink keeps the more severe members."""

    DEPTH = 0
    HEAD = 1
    RUN = 2
    ACTION = 3
    CAP = 4  # a named resource
    DEVICE = 5
    UNTYPED = 6
    ROOM = 7


# What relaxing a limit costs the admin, when several ways of letting the action in exist:
# raising a cap is cheaper than adding nodes. Constants are relaxed whatever they weigh.
WEIGHT = {
    Limit.DEPTH: 3,
    Limit.HEAD: 4,
    Limit.RUN: 2,
    Limit.ACTION: 2,
    Limit.CAP: 1,
    Limit.DEVICE: 1,
    Limit.UNTYPED: 1,
    Limit.ROOM: 6,
}


@dataclass
class Assumption:
    limit: Limit
    subject: str | int | None  # the resource or device, or the pool index for room
    literal: cp_model.IntVar
    constant: bool  # violated wherever the action goes


@dataclass
class NodeChoice:
    """One possible node of one container: a real node, or an extra one (`node` None)."""

    item: int
    pool: int
    node: int | None
    var: cp_model.IntVar


@dataclass
class Fix:
    """The cheapest way in: which limits to relax, and where the action then lands."""

    relaxed: list[Assumption]
    spots: list[NodeChoice]  # one per container
    extra_nodes: dict[int, int] = field(default_factory=dict)  # pool -> extra nodes used


class ExplainModel:
    def __init__(self, frozen: Frozen) -> None:
        self.frozen = frozen
        problem, plan, action = frozen.problem, frozen.plan, frozen.action
        self.problem = problem
        self.queue = problem.queues[action.queue]
        self.usage = plan.usage[action.queue]
        self.items: list[Item] = plan.items_to_place(action)
        self.charge = plan.charge_of(action)
        self.clusters = plan.candidate_clusters(self.items, action.queue) if self.items else []
        self.model = cp_model.CpModel()
        self.assumptions: list[Assumption] = []
        self.spots: list[NodeChoice] = []
        self.cluster_vars: dict[int, cp_model.IntVar] = {}
        self.room: dict[int, Assumption] = {}
        self.slots: dict[int, list[int]] = {}  # pool -> the nodes its containers may use
        self.extra_used: dict[tuple[int, int], cp_model.IntVar] = {}  # (pool, extra node)
        self.solves = 0
        self.minimal = True  # False when a shrink step ran out of time
        self._line()
        self._caps()
        if self.items:
            self._placement()
            self._device_caps()

    # -- building ------------------------------------------------------------------------

    def _assume(self, limit: Limit, subject: str | int | None, violated: bool | None) -> Assumption:
        """A literal for a limit; `violated` True or False makes it a constant."""
        literal = self.model.new_bool_var(f"{limit.name}:{subject}")
        if violated:
            self.model.add(literal == 0)
        assumption = Assumption(limit, subject, literal, violated is not None)
        self.assumptions.append(assumption)
        return assumption

    def _line(self) -> None:
        """Depth, head of line, run and action concurrency: none depends on placement."""
        frozen, queue, usage = self.frozen, self.queue, self.usage
        action = frozen.action
        if queue.depth is not None and self.seen_ahead() >= queue.depth:
            self._assume(Limit.DEPTH, None, True)
        if frozen.line.head is not None:
            self._assume(Limit.HEAD, frozen.line.head.id, True)
        if (
            queue.run_concurrency is not None
            and action.run not in usage.runs
            and len(usage.runs) >= queue.run_concurrency
        ):
            self._assume(Limit.RUN, action.run, True)
        if queue.action_concurrency is not None and self.in_flight() >= queue.action_concurrency:
            self._assume(Limit.ACTION, None, True)

    def seen_ahead(self) -> int:
        """What the depth counts ahead of the action, in the reduced world."""
        earlier = sum(
            1
            for other in self.problem.actions[: self.frozen.action.index]
            if other.queue == self.frozen.action.queue
        )
        return self.queue.running + earlier

    def in_flight(self) -> int:
        return self.queue.running + self.usage.admitted

    def _caps(self) -> None:
        """Named resources and untyped GPUs: what the action adds is known before placement."""
        limits = {ResourceKind.NAMED: Limit.CAP, ResourceKind.UNTYPED_GPU: Limit.UNTYPED}
        for name, _, _ in self.charge.reported().over(self.usage.held, self.queue.caps):
            limit = limits.get(kind_of(name))
            if limit is not None:  # device caps depend on where untyped GPUs land
                self._assume(limit, name, True)

    def _slots(self, pool: int, wanting: int) -> list[int]:
        """Nodes the containers may use: of the nodes with the same room left (a fresh node
        has all of it), as many as containers may want them. Such nodes are interchangeable,
        so the answer is the same as with all of them, and the model a fraction the size."""
        free = self.frozen.plan.free[pool]
        seen: dict[bytes, int] = {}
        slots = []
        for node in range(len(free)):
            key = free[node].tobytes()
            if seen.get(key, 0) < wanting:
                seen[key] = seen.get(key, 0) + 1
                slots.append(node)
        return slots

    def _placement(self) -> None:
        """Each container on one node of a compatible pool, all in one cluster."""
        model, plan, problem = self.model, self.frozen.plan, self.problem
        for c in self.clusters:
            self.cluster_vars[c] = model.new_bool_var(f"cluster:{c}")
        model.add_exactly_one(self.cluster_vars.values())
        wanting: dict[int, int] = {}
        for item in self.items:
            for c in self.clusters:
                for p in item.pools[c]:
                    wanting[p] = wanting.get(p, 0) + 1
        for p in sorted(wanting):
            self.room[p] = self._assume(Limit.ROOM, p, None)
            self.slots[p] = self._slots(p, wanting[p])
        by_node: dict[tuple[int, int | None, int], list[NodeChoice]] = {}
        for i, item in enumerate(self.items):
            for c in self.clusters:
                in_cluster = []
                for p in item.pools[c]:
                    free = plan.free[p]
                    for node in self.slots[p]:
                        if (free[node] >= item.request).all():
                            spot = NodeChoice(i, p, node, model.new_bool_var(""))
                            in_cluster.append(spot)
                            by_node.setdefault((p, node, 0), []).append(spot)
                    # Extra nodes of the pool's shape, open only while its room is relaxed.
                    for extra in range(wanting[p]):
                        spot = NodeChoice(i, p, None, model.new_bool_var(""))
                        model.add_implication(spot.var, self.room[p].literal.Not())
                        in_cluster.append(spot)
                        by_node.setdefault((p, None, extra), []).append(spot)
                model.add(sum(s.var for s in in_cluster) == self.cluster_vars[c])
                self.spots += in_cluster
        for (p, slot, extra), spots in by_node.items():
            pool = problem.pools[p]
            room = pool.room if slot is None else plan.free[p][slot]
            for d in range(len(problem.dims)):
                if pool.room[d] >= UNBOUNDED:
                    continue
                weighted = [(int(self.items[s.item].request[d]), s.var) for s in spots]
                _at_most(model, weighted, int(room[d]))
            if slot is None:
                used = model.new_bool_var("")
                for s in spots:
                    model.add_implication(s.var, used)
                self.extra_used[(p, extra)] = used

    def device_landing(self, device: str) -> list[NodeChoice]:
        """Spots where an untyped container of the action counts against `device`'s cap."""
        return [
            s
            for s in self.spots
            if self.items[s.item].untyped and self.problem.pools[s.pool].device == device
        ]

    def device_room(self, device: str) -> int:
        """How much of `device`'s cap is left for the action after its typed request."""
        return self.queue.caps[device] - self.usage.held.amount(device) - self.charge.amount(device)

    def _device_caps(self) -> None:
        """Device caps: typed requests are known; untyped GPUs count where they land."""
        devices = set(self.charge.of_kind(ResourceKind.DEVICE)) | {
            self.problem.pools[s.pool].device for s in self.spots if self.items[s.item].untyped
        }
        for device in sorted(d for d in devices if d is not None and d in self.queue.caps):
            room = self.device_room(device)
            typed = self.charge.amount(device)
            landing = self.device_landing(device)
            if typed and room < 0:
                self._assume(Limit.DEVICE, device, True)
            elif landing:
                # Work already over a lowered cap keeps new untyped GPUs off that device.
                assumption = self._assume(Limit.DEVICE, device, None)
                weighted = sum(self.items[s.item].gpus * s.var for s in landing)
                self.model.add(weighted <= max(room, 0)).only_enforce_if(assumption.literal)

    # -- solving -------------------------------------------------------------------------

    def _solver(self) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1  # required for sufficient assumptions
        solver.parameters.random_seed = 0
        # Presolve off: the models are tiny, and with it a core may name a literal that is
        # not an assumption (OR-Tools issue 5141).
        solver.parameters.cp_model_presolve = False
        # Probing every Boolean at the root took 0.3 s of a 0.35 s solve on a 2,500-variable
        # model of the M scenario; without it the solve takes 15 ms.
        solver.parameters.cp_model_probing_level = 0
        solver.parameters.max_deterministic_time = SOLVE_LIMIT_DETERMINISTIC
        return solver

    def _infeasible(self, assumed: list[Assumption]) -> tuple[bool | None, set[int]]:
        """Whether the action cannot get in with `assumed` enforced (None: no answer within
        the limit), and a core of them."""
        self.model.clear_assumptions()
        self.model.add_assumptions([a.literal for a in assumed])
        solver = self._solver()
        status = solver.solve(self.model)
        self.solves += 1
        if status == cp_model.INFEASIBLE:
            return True, set(solver.sufficient_assumptions_for_infeasibility())
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False, set()
        return None, set()

    def minimal_core(self) -> list[Assumption] | None:
        """A minimal set of limits that together keep the action out; None if none does.

        A shrink step without an answer keeps its member: the set stays sufficient, and
        `self.minimal` says it may not be minimal.
        """
        constants = [a for a in self.assumptions if a.constant]
        if constants:
            # A violated constant keeps the action out by itself: the most severe is minimal.
            return [min(constants, key=lambda a: a.limit)]
        infeasible, core = self._infeasible(self.assumptions)
        if infeasible is None:
            raise Unavailable("the explanation model found no answer within its time limit")
        if not infeasible:
            return None
        members = [a for a in self.assumptions if a.literal.index in core] or list(self.assumptions)
        # Least severe first, so that the shrink keeps the severe members of the core.
        for candidate in sorted(members, key=lambda a: -a.limit):
            if candidate not in members:
                continue
            trial = [a for a in members if a is not candidate]
            if self._witness(trial):
                continue  # needed: without it the action has a place, no solve required
            infeasible, core = self._infeasible(trial)
            if infeasible is None:
                self.minimal = False
            elif infeasible:
                members = [a for a in trial if a.literal.index in core] or trial
        return sorted(members, key=lambda a: (a.limit, str(a.subject)))

    def _witness(self, enforced: list[Assumption]) -> bool:
        """Whether a first-fit placement satisfies every limit in `enforced` (no constants):
        a proof that they do not keep the action out, found without a solve. Pools whose
        room is not enforced take containers on extra nodes; the rest take them on nodes
        with room left; untyped GPUs stay under the enforced caps of the devices they land
        on. A miss proves nothing (the model then decides)."""
        held = {a.subject for a in enforced if a.limit is Limit.ROOM}
        capped = {a.subject for a in enforced if a.limit is Limit.DEVICE}
        order = sorted(
            range(len(self.items)),
            key=lambda i: (-self.items[i].gpus, -int(self.items[i].request[0])),
        )
        return any(self._first_fit(c, order, held, capped) for c in self.clusters)

    def _first_fit(self, c: int, order: list[int], held: set, capped: set) -> bool:
        taken: dict[tuple[int, int], np.ndarray] = {}
        landing: dict[str, int] = {}
        for i in order:
            item = self.items[i]
            placed = False
            for p in item.pools[c]:
                device = self.problem.pools[p].device
                if item.untyped and device in capped:
                    room = max(self.device_room(str(device)), 0)
                    if landing.get(str(device), 0) + item.gpus > room:
                        continue
                if p not in held:
                    placed = True  # an extra node of the pool's shape takes it
                else:
                    for node in self.slots[p]:
                        left = self.frozen.plan.free[p][node] - taken.get((p, node), 0)
                        if (left >= item.request).all():
                            taken[(p, node)] = taken.get((p, node), 0) + item.request
                            placed = True
                            break
                if placed:
                    if item.untyped:
                        landing[str(device)] = landing.get(str(device), 0) + item.gpus
                    break
            if not placed:
                return False
        return True

    def cheapest_fix(self) -> Fix:
        """Keep the most (weighted) limits that still let the action in; relax the rest."""
        self.model.clear_assumptions()
        extra = list(self.extra_used.values())
        scale = len(extra) + 1  # fewer extra nodes only breaks ties between equal sets
        self.model.maximize(
            scale * sum(WEIGHT[a.limit] * a.literal for a in self.assumptions) - sum(extra)
        )
        solver = self._solver()
        status = solver.solve(self.model)
        self.solves += 1
        self.model.clear_objective()
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise Unavailable("the explanation model found no fix within its time limit")
        relaxed = [a for a in self.assumptions if not solver.boolean_value(a.literal)]
        spots = [s for s in self.spots if solver.boolean_value(s.var)]
        extra_nodes: dict[int, int] = {}
        for (p, _), used in self.extra_used.items():
            if solver.boolean_value(used):
                extra_nodes[p] = extra_nodes.get(p, 0) + 1
        return Fix(relaxed, sorted(spots, key=lambda s: s.item), extra_nodes)


def _at_most(
    model: cp_model.CpModel, weighted: list[tuple[int, cp_model.IntVar]], bound: int
) -> None:
    """sum(w * var) <= bound, left out when it cannot bind, and divided by the weights'
    common divisor: memory in bytes makes coefficients near 2^34, which slow CP-SAT down."""
    weighted = [(w, var) for w, var in weighted if w]
    if sum(w for w, _ in weighted) <= bound:
        return
    divisor = 0
    for w, _ in weighted:
        divisor = gcd(divisor, w)
    model.add(sum((w // divisor) * var for w, var in weighted) <= bound // divisor)
