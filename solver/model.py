"""The tick's CP-SAT model: can these units all be placed on nodes at once?

`solver.tick` fixes admissions in global order; when best-fit cannot place an
action, it asks this model whether the action fits together with the
admissions already decided, letting every decided admission that shares
nodes with it move (to any node, pool or cluster it may use). Caps and
concurrency are settled before the model, exactly, except the one charge
that depends on placement: an untyped GPU counts against the cap of the
device it lands on, so those caps are constraints here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from math import gcd

import numpy as np
from ortools.sat.python import cp_model

from solver.plan import Placement, Spot
from solver.problem import UNBOUNDED, Item, Problem


class Feasibility(StrEnum):
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNKNOWN = "unknown"


@dataclass
class Unit:
    """Containers that land together in one cluster: an action's, or a starting pool's."""

    key: tuple[str, int]  # ("action", index) or ("env", index)
    queue: int
    items: list[Item]
    hint: Placement | None = None


@dataclass(frozen=True)
class Scope:
    """Keep every unit of a model inside one cluster and these pools of it."""

    cluster: int
    pools: frozenset[int]


@dataclass
class _Vars:
    clusters: dict[int, cp_model.IntVar] = field(default_factory=dict)
    spots: list[list[tuple[int, int, cp_model.IntVar]]] = field(default_factory=list)


class PlacementModel:
    """Placement of `units` on the room left by everything else (`free`, per pool and node)."""

    def __init__(
        self,
        problem: Problem,
        units: list[Unit],
        free: list[np.ndarray],
        opened: list[np.ndarray],
        device_room: dict[tuple[int, str], int],
        scope: Scope | None = None,
    ) -> None:
        self.problem = problem
        self.units = units
        self.free = free
        self.scope = scope
        self.model = cp_model.CpModel()
        self.vars: list[_Vars] = []
        slots = self._slots(opened)
        for unit in units:
            self.vars.append(self._unit_vars(unit, slots))
        self._container_on_one_node()
        self._node_room()
        self._device_caps(device_room)
        self._hint()

    def _slots(self, opened: list[np.ndarray]) -> dict[int, list[int]]:
        """Nodes the model may use: those with work or up now, plus one fresh node per container."""
        wanting: dict[int, int] = {}
        for unit in self.units:
            for item in unit.items:
                for pools in item.pools.values():
                    for p in pools:
                        if self.scope is None or p in self.scope.pools:
                            wanting[p] = wanting.get(p, 0) + 1
        slots = {}
        for p, count in wanting.items():
            used = np.flatnonzero(opened[p])
            fresh = np.flatnonzero(~opened[p])[:count]
            slots[p] = [int(n) for n in np.concatenate([used, fresh])]
        return slots

    def _unit_vars(self, unit: Unit, slots: dict[int, list[int]]) -> _Vars:
        found = _Vars()
        routed = self.problem.queues[unit.queue].clusters
        clusters = [c for c in routed if all(c in item.pools for item in unit.items)]
        if self.scope is not None:
            clusters = [c for c in clusters if c == self.scope.cluster]
        for c in clusters:
            found.clusters[c] = self.model.new_bool_var("")
        self.model.add_exactly_one(found.clusters.values())
        for item in unit.items:
            spots = []
            for c in clusters:
                for p in item.pools[c]:
                    if self.scope is not None and p not in self.scope.pools:
                        continue
                    fits = (self.free[p][slots[p]] >= item.request).all(axis=1)
                    for node in np.asarray(slots[p])[fits]:
                        spots.append((p, int(node), self.model.new_bool_var("")))
            found.spots.append(spots)
        return found

    def _container_on_one_node(self) -> None:
        """Each container sits on exactly one node, in the cluster its unit chose."""
        for found in self.vars:
            for spots in found.spots:
                for c, chosen in found.clusters.items():
                    pools = set(self.problem.pools_of_cluster[c])
                    self.model.add(sum(lit for p, _, lit in spots if p in pools) == chosen)

    def _node_room(self) -> None:
        """Containers on a node fit the room everything fixed left on it."""
        terms: dict[tuple[int, int], list[tuple[Item, cp_model.IntVar]]] = {}
        for unit, found in zip(self.units, self.vars, strict=True):
            for item, spots in zip(unit.items, found.spots, strict=True):
                for p, node, lit in spots:
                    terms.setdefault((p, node), []).append((item, lit))
        for (p, node), placed in terms.items():
            room = self.problem.pools[p].room
            for d in range(len(self.problem.dims)):
                if room[d] >= UNBOUNDED:
                    continue
                weighted = [(int(item.request[d]), lit) for item, lit in placed]
                _add_le(self.model, weighted, int(self.free[p][node, d]))

    def _device_caps(self, device_room: dict[tuple[int, str], int]) -> None:
        """An untyped GPU counts against the cap of the device type it lands on."""
        for (q, device), room in device_room.items():
            weighted = []
            for unit, found in zip(self.units, self.vars, strict=True):
                if unit.queue != q:
                    continue
                for item, spots in zip(unit.items, found.spots, strict=True):
                    if item.untyped:
                        weighted += [
                            (item.gpus, lit)
                            for p, _, lit in spots
                            if self.problem.pools[p].device == device
                        ]
            _add_le(self.model, weighted, room)

    def _hint(self) -> None:
        for unit, found in zip(self.units, self.vars, strict=True):
            if unit.hint is None:
                continue
            for c, lit in found.clusters.items():
                self.model.add_hint(lit, c == unit.hint.cluster)
            for spots, spot in zip(found.spots, unit.hint.spots, strict=True):
                for p, node, lit in spots:
                    self.model.add_hint(lit, (p, node) == spot)

    @property
    def num_variables(self) -> int:
        return len(self.model.proto.variables)

    def solve(
        self, deterministic_limit: float, seed: int
    ) -> tuple[Feasibility, list[Placement], float]:
        """The verdict, the placements when feasible, and the deterministic time it took."""
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1  # deterministic, and the machine runs a service too
        solver.parameters.random_seed = seed
        solver.parameters.max_deterministic_time = max(deterministic_limit, 0.001)
        # These models are small and hinted; presolve costs more than it saves here and can
        # drop a feasible hint (CPSAT-NOTES.md; measured: twice the checks per second).
        solver.parameters.cp_model_presolve = False
        status = solver.solve(self.model)
        spent = solver.deterministic_time
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return Feasibility.FEASIBLE, [self._placement(solver, v) for v in self.vars], spent
        if status == cp_model.INFEASIBLE:
            return Feasibility.INFEASIBLE, [], spent
        return Feasibility.UNKNOWN, [], spent

    @staticmethod
    def _placement(solver: cp_model.CpSolver, found: _Vars) -> Placement:
        cluster = next(c for c, lit in found.clusters.items() if solver.boolean_value(lit))
        spots: tuple[Spot, ...] = tuple(
            next((p, node) for p, node, lit in spots if solver.boolean_value(lit))
            for spots in found.spots
        )
        return Placement(cluster, spots)


def _add_le(
    model: cp_model.CpModel, weighted: list[tuple[int, cp_model.IntVar]], bound: int
) -> None:
    """sum(w * lit) <= bound, divided by the weights' common divisor (bytes are large)."""
    weighted = [(w, lit) for w, lit in weighted if w]
    if sum(w for w, _ in weighted) <= bound:
        return
    divisor = 0
    for w, _ in weighted:
        divisor = gcd(divisor, w)
    model.add(sum((w // divisor) * lit for w, lit in weighted) <= bound // divisor)
