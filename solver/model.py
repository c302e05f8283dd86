"""The tick's CP-SAT model: admission, cluster choice and a node for every container.

Built once per tick over the actions whose outcome the best-fit pass cannot
settle on its own (and every action admitted before them, whose placement may
move to make room). The lexicographic order of admissions is not an objective
here: `solver.tick` fixes admissions one at a time in global order and asks
this model only "is this set feasible?", changing variable domains in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from solver.plan import Placement, Plan
from solver.problem import UNBOUNDED, Item, Problem


@dataclass
class _Unit:
    """Something that occupies nodes when active: an action's containers or a starting pool."""

    active: cp_model.IntVar
    queue: int
    items: list[Item]
    clusters: dict[int, cp_model.IntVar] = field(default_factory=dict)
    # per item: (pool, node, literal)
    spots: list[list[tuple[int, int, cp_model.IntVar]]] = field(default_factory=list)


class FeasibilityStatus:
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"


class TickModel:
    """One model per tick; `check()` answers feasibility for a set of fixed admissions."""

    def __init__(self, problem: Problem, members: list[int], seed: int) -> None:
        self.problem = problem
        self.members = members
        self.seed = seed
        self.model = cp_model.CpModel()
        self.admit = {i: self.model.new_bool_var(f"a{i}") for i in members}
        self.env_start: dict[int, cp_model.IntVar] = {}
        self.action_units: dict[int, _Unit] = {}
        self.env_units: dict[int, _Unit] = {}
        self.solves = 0
        self._units()
        self._container_on_one_node()
        self._node_room()
        self._queue_caps()
        self._concurrency()
        self._strict_prefix()

    # -- variables -----------------------------------------------------------------------

    def _units(self) -> None:
        """Admission literals, pool starts, cluster choices and node literals."""
        slots = self._model_slots()
        for i in self.members:
            action = self.problem.actions[i]
            if action.env is None:
                self.action_units[i] = self._unit(self.admit[i], action.queue, action.items, slots)
                continue
            env = self.problem.envs[action.env]
            if env.running:
                continue
            start = self.env_start.get(action.env)
            if start is None:
                start = self.env_start[action.env] = self.model.new_bool_var(f"s{action.env}")
                self.env_units[action.env] = self._unit(start, env.queue, env.items, slots)
            self.model.add_implication(self.admit[i], start)
        for e, start in self.env_start.items():
            joiners = [self.admit[i] for i in self.members if self.problem.actions[i].env == e]
            self.model.add_bool_or(joiners).only_enforce_if(start)

    def _model_slots(self) -> dict[int, int]:
        """Nodes of each pool the model may use: those up now plus one new node per container."""
        wanting: dict[int, int] = {}
        for items in self._all_items():
            for item in items:
                for pools in item.pools.values():
                    for p in pools:
                        wanting[p] = wanting.get(p, 0) + 1
        return {
            p: min(self.problem.pools[p].max_nodes, self.problem.pools[p].nodes + count)
            for p, count in wanting.items()
        }

    def _all_items(self) -> list[list[Item]]:
        seen_envs: set[int] = set()
        groups = []
        for i in self.members:
            action = self.problem.actions[i]
            if action.env is None:
                groups.append(action.items)
            elif not self.problem.envs[action.env].running and action.env not in seen_envs:
                seen_envs.add(action.env)
                groups.append(self.problem.envs[action.env].items)
        return groups

    def _unit(
        self, active: cp_model.IntVar, queue: int, items: list[Item], slots: dict[int, int]
    ) -> _Unit:
        unit = _Unit(active, queue, items)
        routed = self.problem.queues[queue].clusters
        clusters = [c for c in routed if all(c in item.pools for item in items)]
        for c in clusters:
            unit.clusters[c] = self.model.new_bool_var("")
        self.model.add(sum(unit.clusters.values()) == active)
        for item in items:
            spots = []
            for c in clusters:
                for p in item.pools[c]:
                    for node in range(slots[p]):
                        spots.append((p, node, self.model.new_bool_var("")))
            unit.spots.append(spots)
        return unit

    # -- constraints ---------------------------------------------------------------------

    def _units_iter(self) -> list[_Unit]:
        return [*self.action_units.values(), *self.env_units.values()]

    def _container_on_one_node(self) -> None:
        """Each container of an active unit sits on exactly one node of the unit's cluster."""
        for unit in self._units_iter():
            for spots in unit.spots:
                for c, chosen in unit.clusters.items():
                    pools = set(self.problem.pools_of_cluster[c])
                    self.model.add(sum(lit for p, _, lit in spots if p in pools) == chosen)

    def _node_room(self) -> None:
        """Containers on a node fit the room running work left on it."""
        terms: dict[tuple[int, int], list[tuple[Item, cp_model.IntVar]]] = {}
        for unit in self._units_iter():
            for item, spots in zip(unit.items, unit.spots, strict=True):
                for p, node, lit in spots:
                    terms.setdefault((p, node), []).append((item, lit))
        for (p, node), placed in terms.items():
            pool = self.problem.pools[p]
            free = pool.room - pool.used[node]
            for d in range(len(self.problem.dims)):
                if pool.room[d] >= UNBOUNDED:
                    continue
                weighted = [(int(item.request[d]), lit) for item, lit in placed if item.request[d]]
                if weighted and sum(w for w, _ in weighted) > free[d]:
                    _add_le(self.model, weighted, int(free[d]))

    def _queue_caps(self) -> None:
        """Per queue: named resources, device types (untyped by where they land), untyped GPUs."""
        for q, queue in enumerate(self.problem.queues):
            units = [
                (u.active, self._demand_of_unit(key, kind))
                for kind, mapping in (("action", self.action_units), ("env", self.env_units))
                for key, u in mapping.items()
                if u.queue == q
            ]
            if not units:
                continue
            for name, cap in queue.caps.items():
                weighted = [(d.resources.get(name, 0), lit) for lit, d in units]
                _add_le(self.model, weighted, max(0, cap - queue.used.get(name, 0)))
            for device, cap in queue.device_caps.items():
                weighted = [(d.devices.get(device, 0), lit) for lit, d in units]
                for unit in self._units_iter():
                    if unit.queue != q:
                        continue
                    for item, spots in zip(unit.items, unit.spots, strict=True):
                        if item.untyped:
                            weighted += [
                                (item.gpus, lit)
                                for p, _, lit in spots
                                if self.problem.pools[p].device == device
                            ]
                _add_le(self.model, weighted, max(0, cap - queue.device_used.get(device, 0)))
            if queue.max_gpus is not None:
                weighted = [(d.untyped, lit) for lit, d in units]
                _add_le(self.model, weighted, max(0, queue.max_gpus - queue.untyped_used))

    def _demand_of_unit(self, key: int, kind: str):  # -> Demand
        if kind == "env":
            return self.problem.envs[key].demand
        return self.problem.actions[key].demand

    def _concurrency(self) -> None:
        """Action concurrency per queue, and run concurrency for runs not yet active."""
        for q, queue in enumerate(self.problem.queues):
            mine = [i for i in self.members if self.problem.actions[i].queue == q]
            if not mine:
                continue
            if queue.action_concurrency is not None:
                slots = max(0, queue.action_concurrency - queue.running)
                if len(mine) > slots:
                    self.model.add(sum(self.admit[i] for i in mine) <= slots)
            if queue.run_concurrency is not None:
                new_runs: dict[str, list[int]] = {}
                for i in mine:
                    run = self.problem.actions[i].run
                    if run not in queue.active_runs:
                        new_runs.setdefault(run, []).append(i)
                slots = max(0, queue.run_concurrency - len(queue.active_runs))
                if len(new_runs) > slots:
                    opened = []
                    for members in new_runs.values():
                        run_open = self.model.new_bool_var("")
                        for i in members:
                            self.model.add_implication(self.admit[i], run_open)
                        opened.append(run_open)
                    self.model.add(sum(opened) <= slots)

    def _strict_prefix(self) -> None:
        """In a strict_fifo queue an action is admitted only if the one before it is."""
        previous: dict[int, int] = {}
        for i in self.members:
            q = self.problem.actions[i].queue
            if not self.problem.queues[q].strict:
                continue
            if q in previous:
                self.model.add_implication(self.admit[i], self.admit[previous[q]])
            previous[q] = i

    # -- solving -------------------------------------------------------------------------

    @property
    def num_variables(self) -> int:
        return len(self.model.proto.variables)

    def check(
        self, admitted: set[int], candidate: int, hint: Plan, deterministic_limit: float
    ) -> tuple[str, Plan | None]:
        """Can `admitted` plus `candidate` all be placed? Every other member is left out."""
        proto = self.model.proto
        for i, lit in self.admit.items():
            value = 1 if i in admitted or i == candidate else 0
            domain = proto.variables[lit.index].domain
            domain[0] = value
            domain[1] = value
        self._hint(hint)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = self.seed
        solver.parameters.max_deterministic_time = max(deterministic_limit, 0.01)
        status = solver.solve(self.model)
        self.solves += 1
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return FeasibilityStatus.FEASIBLE, self._decode(solver)
        if status == cp_model.INFEASIBLE:
            return FeasibilityStatus.INFEASIBLE, None
        return FeasibilityStatus.UNKNOWN, None

    def _hint(self, plan: Plan) -> None:
        proto = self.model.proto
        proto.solution_hint.vars.clear()
        proto.solution_hint.values.clear()
        variables: list[int] = []
        values: list[int] = []
        for i, lit in self.admit.items():
            variables.append(lit.index)
            values.append(1 if i in plan.admitted else 0)
        placed: dict[int, Placement] = {
            i: p for i, p in plan.admitted.items() if p is not None and i in self.action_units
        }
        for e, start in self.env_start.items():
            variables.append(start.index)
            values.append(1 if e in plan.env_started else 0)
            if e in plan.env_started:
                placed_env = plan.env_started[e]
                self._hint_unit(self.env_units[e], placed_env, variables, values)
        for i, placement in placed.items():
            self._hint_unit(self.action_units[i], placement, variables, values)
        proto.solution_hint.vars.extend(variables)
        proto.solution_hint.values.extend(values)

    @staticmethod
    def _hint_unit(
        unit: _Unit, placement: Placement, variables: list[int], values: list[int]
    ) -> None:
        for c, lit in unit.clusters.items():
            variables.append(lit.index)
            values.append(1 if c == placement.cluster else 0)
        for spots, spot in zip(unit.spots, placement.spots, strict=True):
            for p, node, lit in spots:
                variables.append(lit.index)
                values.append(1 if (p, node) == spot else 0)

    def _decode(self, solver: cp_model.CpSolver) -> Plan:
        """The solution as a plan: every admitted member with its cluster and nodes."""
        plan = Plan(self.problem)
        started: dict[int, Placement] = {}
        for e, unit in self.env_units.items():
            if solver.boolean_value(unit.active):
                started[e] = _placement_of(solver, unit)
        for i in self.members:
            if not solver.boolean_value(self.admit[i]):
                continue
            action = self.problem.actions[i]
            if i in self.action_units:
                plan.admit(action, _placement_of(solver, self.action_units[i]))
            elif plan.starts_env(action):
                plan.admit(action, started[action.env])  # type: ignore[index]
            else:
                plan.admit(action, None)
        return plan


def _placement_of(solver: cp_model.CpSolver, unit: _Unit) -> Placement:
    cluster = next(c for c, lit in unit.clusters.items() if solver.boolean_value(lit))
    spots = tuple(
        next((p, node) for p, node, lit in spots if solver.boolean_value(lit))
        for spots in unit.spots
    )
    return Placement(cluster, spots)


def _add_le(
    model: cp_model.CpModel, weighted: list[tuple[int, cp_model.IntVar]], bound: int
) -> None:
    """sum(w * lit) <= bound, scaled down by the weights' common divisor (bytes are large)."""
    from math import gcd

    weighted = [(w, lit) for w, lit in weighted if w]
    if not weighted or sum(w for w, _ in weighted) <= bound:
        return
    divisor = 0
    for w, _ in weighted:
        divisor = gcd(divisor, w)
    model.add(sum((w // divisor) * lit for w, lit in weighted) <= bound // divisor)
