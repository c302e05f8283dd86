"""Refusals proven without a model: what no repacking of the decided admissions can free.

Where this tick's admissions sit may change (a model moves them), but which containers
must be placed does not, and each may only land on the pools it is eligible for (in a
cluster where every container of its unit has one), next to the running work, which is
pinned. Relaxing "on one node" to "in one pool" gives, per resource, a transport problem
from groups of containers (by the pools they may use) to pools (by their capacity): if
no flow carries every container's demand, no placement exists. Each of these flows is a
necessary condition:

- volume, per resource: what the containers request into the pools' room;
- per GPU count k the action asks for: the containers of k GPUs or more, by what they
  request, into the GPUs of the nodes that could take one; and the same containers, one
  each, into how many of them the nodes take side by side (`capacity // k` a node).

An action for which, in every cluster it could use, one of them has no such flow cannot
be admitted next to the decided admissions: the refusal is a proof. Admissions only add
demand within one tick (nothing is released), so a refusal proven now holds for the rest
of the tick, and for any request no smaller with the same eligibility.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.graph.python.max_flow import SimpleMaxFlow

from solver.placement.problem import GPU_DIM, UNBOUNDED, Item, Problem

# A family of flows: (resource, size k, counting slots rather than volume).
Family = tuple[int, int, bool]
SOURCE, SINK = 0, 1  # the flow's nodes; then the groups, then the pools


@dataclass(frozen=True, slots=True)
class _UnitBounds:
    """A list of containers as the bounds count it: each container's group and request."""

    items: list[Item]  # held, so the list's id stays its own
    groups: list[int]
    requests: list[np.ndarray]


class RoomBounds:
    """The decided admissions' containers by eligibility, and each pool's capacity."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        pools = problem.pools
        # Per node of every pool, pool by pool: room next to the running work (pinned); every
        # node to full scale. `_pool_rows` bounds each pool's rows.
        capacity = [np.maximum(pool.room - pool.used, 0) for pool in pools]
        dims = len(problem.dims)
        self._capacity = np.concatenate(capacity) if capacity else _empty_rows(dims)
        self._pool_rows = np.concatenate([[0], np.cumsum([len(c) for c in capacity])])
        self.declared = np.array([pool.room < UNBOUNDED for pool in pools], dtype=bool).reshape(
            len(pools), len(problem.dims)
        )
        self.group_of: dict[tuple[int, ...], int] = {}  # eligible pools -> group index
        self.group_pools: list[np.ndarray] = []
        # The decided units, each as its containers' groups and requests; and how many
        # containers they hold.
        self._decided_units: list[_UnitBounds] = []
        self.containers = 0
        # Every decided container's request and group, as arrays, up to the units decided
        # when the flows were last read (`_expanded` of them).
        self._requested = _empty_rows(len(problem.dims))
        self._grouped = np.zeros(0, dtype=np.int64)
        self._expanded = 0
        # What the decided containers ask of each family of flows, per group, counted up to
        # the first so many decided containers (the rest are added when it is next read).
        self._families: dict[Family, tuple[int, np.ndarray]] = {}
        self._arc_groups = -1
        self._arc_cache = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self._room: dict[Family, np.ndarray] = {}
        self._eligible: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
        self._unit_clusters: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        self._placeable: dict[tuple[int, tuple[tuple[int, bytes], ...]], int] = {}
        self._units: dict[tuple[int, int], _UnitBounds] = {}
        self._unit_groups: dict[tuple[int, tuple[int, ...]], list[int]] = {}

    def admit(self, queue: int, items: list[Item]) -> None:
        """Count a decided unit's containers (an action's, or a pool's it starts)."""
        # A walk admits thousands of units between the flows it reads: a list of containers
        # (the actions of a queue with equal containers share one) is worked out once, and
        # its groups once per queue and pool sets (containers of one share their `pools`).
        key = (queue, id(items))
        unit = self._units.get(key)
        if unit is None:
            pools = (queue, tuple(id(item.pools) for item in items))
            groups = self._unit_groups.get(pools)
            if groups is None:
                clusters = self._clusters(queue, items)
                groups = [self._group(self._eligible_pools(item, clusters)) for item in items]
                self._unit_groups[pools] = groups
            unit = self._units[key] = _UnitBounds(items, groups, [i.request for i in items])
        self._decided_units.append(unit)
        self.containers += len(items)

    def refutes(self, queue: int, items: list[Item]) -> bool:
        """Whether no placement of `items` (one unit of `queue`) exists next to the decided
        admissions, however they are repacked: a proof, never a guess."""
        # A request found placeable stays so until a decided container is added.
        key = (queue, tuple((id(item.pools), item.request.tobytes()) for item in items))
        if self._placeable.get(key) == self.containers:
            return False
        clusters = self._clusters(queue, items)
        if all(self._refuted_in(cluster, items) for cluster in clusters):
            return True
        self._placeable[key] = self.containers
        return False

    def confined(self, queue: int, items: list[Item], pools: frozenset[int]) -> bool:
        """Whether every container of the unit may only ever be placed on `pools`."""
        clusters = self._clusters(queue, items)
        return all(pools.issuperset(self._eligible_pools(item, clusters)) for item in items)

    def _clusters(self, queue: int, items: list[Item]) -> list[int]:
        """The clusters a unit may choose: routed, and each container has a pool there."""
        key = (queue, tuple(id(item.pools) for item in items))
        clusters = self._unit_clusters.get(key)
        if clusters is None:
            routed = self.problem.queues[queue].clusters
            clusters = [c for c in routed if all(c in item.pools for item in items)]
            self._unit_clusters[key] = clusters
        return clusters

    def _eligible_pools(self, item: Item, clusters: list[int]) -> tuple[int, ...]:
        key = (id(item.pools), tuple(clusters))
        pools = self._eligible.get(key)
        if pools is None:
            pools = self._eligible[key] = tuple(sorted(p for c in clusters for p in item.pools[c]))
        return pools

    def _group(self, pools: tuple[int, ...]) -> int:
        g = self.group_of.get(pools)
        if g is None:
            g = self.group_of[pools] = len(self.group_pools)
            self.group_pools.append(np.array(pools, dtype=np.int64))
        return g

    def _refuted_in(self, cluster: int, items: list[Item]) -> bool:
        """Some family of flows cannot carry the decided containers and `items` placed in
        `cluster`."""
        mine = [(self._group(tuple(item.pools[cluster])), item.request) for item in items]
        for family in self._families_of(items):
            wanted = [(g, _amount(request, family)) for g, request in mine]
            if not self._flows(family, wanted):
                return True
        return False

    def _families_of(self, items: list[Item]) -> list[Family]:
        """GPUs first (the scarce resource, where sizes matter), then the volume of the rest.

        Measured at M: of 1,337 flows that fell short, 1,324 were of GPU volume and 2 of
        CPU or memory per size, which cost as many flows as all the others.
        """
        requested = {d for item in items for d in np.flatnonzero(item.request).tolist()}
        order = sorted(requested, key=lambda d: d != GPU_DIM)
        families: list[Family] = [(d, 1, False) for d in order]
        if GPU_DIM in requested:
            sizes = sorted({int(item.request[GPU_DIM]) for item in items})
            # Size 1 adds nothing to the volume flow: a container of k takes k of it.
            families[1:1] = [(GPU_DIM, k, slots) for k in sizes if k > 1 for slots in (True, False)]
        return families

    def _flows(self, family: Family, wanted: list[tuple[int, int]]) -> bool:
        """Whether one flow carries every decided container's demand and `wanted`."""
        demand = self._demand(family).copy()
        for g, amount in wanted:
            demand[g] += amount
        total = int(demand.sum())
        if total == 0:
            return True
        groups = len(demand)
        tails, heads = self._arcs()
        pools = np.arange(len(self.problem.pools), dtype=np.int64)
        flow = SimpleMaxFlow()
        flow.add_arcs_with_capacity(
            np.full(groups, SOURCE, dtype=np.int64), 2 + np.arange(groups), demand
        )
        asking = demand[tails] > 0  # most groups ask nothing of a GPU family, say
        tails, heads = tails[asking], heads[asking]
        flow.add_arcs_with_capacity(
            2 + tails, 2 + groups + heads, np.full(len(tails), total, dtype=np.int64)
        )
        flow.add_arcs_with_capacity(
            2 + groups + pools,
            np.full(len(pools), SINK, dtype=np.int64),
            np.minimum(self._room_of(family), total),
        )
        if flow.solve(SOURCE, SINK) != SimpleMaxFlow.OPTIMAL:
            return True  # not decided: no proof
        return bool(flow.optimal_flow() >= total)

    def _arcs(self) -> tuple[np.ndarray, np.ndarray]:
        """Each group's arcs to the pools it may use: (group, pool) pairs."""
        if self._arc_groups != len(self.group_pools):
            counts = [len(pools) for pools in self.group_pools]
            self._arc_cache = (
                np.repeat(np.arange(len(counts), dtype=np.int64), counts),
                np.concatenate(self.group_pools),
            )
            self._arc_groups = len(self.group_pools)
        return self._arc_cache

    def _demand(self, family: Family) -> np.ndarray:
        """Per group, what its decided containers ask of the family: counted when first
        read, then brought up to date with the containers decided since, all at once."""
        counted, demand = self._families.get(family, (0, np.zeros(0, dtype=np.int64)))
        groups = len(self.group_pools)
        if counted == self.containers and len(demand) == groups:
            return demand
        requested, grouped = self._decided()
        dim, size, slots = family
        values = requested[counted:, dim]
        amounts = np.where(values >= size, 1 if slots else values, 0)
        added = np.bincount(grouped[counted:], weights=amounts, minlength=groups)
        demand = np.concatenate([demand, np.zeros(groups - len(demand), dtype=np.int64)])
        demand = demand + added.astype(np.int64)
        self._families[family] = (self.containers, demand)
        return demand

    def _decided(self) -> tuple[np.ndarray, np.ndarray]:
        """Every decided container's request, one row each, and its group."""
        if self._expanded < len(self._decided_units):
            new = self._decided_units[self._expanded :]
            self._expanded = len(self._decided_units)
            requests = [request for unit in new for request in unit.requests]
            groups = [g for unit in new for g in unit.groups]
            if requests:
                self._requested = np.vstack([self._requested, np.array(requests)])
                self._grouped = np.concatenate([self._grouped, np.array(groups, dtype=np.int64)])
        return self._requested, self._grouped

    def _room_of(self, family: Family) -> np.ndarray:
        """Per pool, what its nodes offer the family (unbounded where it declares none)."""
        room = self._room.get(family)
        if room is None:
            dim, size, slots = family
            column = self._capacity[:, dim]
            offered = column // size if slots else np.where(column >= size, column, 0)
            summed = np.concatenate([[0], np.cumsum(offered)])
            offered = summed[self._pool_rows[1:]] - summed[self._pool_rows[:-1]]
            room = np.where(self.declared[:, dim], offered, UNBOUNDED)
            self._room[family] = room
        return room


def _amount(request: np.ndarray, family: Family) -> int:
    dim, size, slots = family
    value = int(request[dim])
    if value < size:
        return 0
    return 1 if slots else value


def _empty_rows(dims: int) -> np.ndarray:
    return np.zeros((0, dims), dtype=np.int64)
