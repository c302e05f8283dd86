"""Room for a contested action found by repacking the units in its way wherever they may go.

A local model (solver.placement.decide) lets the decided units on the action's pools move only
within those pools of one cluster. On a fleet where most units could also run elsewhere (an
untyped GPU on another device, a queue routed to several clusters), the room is often found
by moving one of them out of the action's pools: to another device's pools, or with all its
containers to another cluster. Measured on the benchmark's M line walked to its end, 56 of the
93 local "no" answers had such a placement.

This module packs the action together with every decided unit that has work on a pool the
action may use (its *neighbourhood*), each free to go to any pool it is eligible for in any
cluster it may use, on the room everything else leaves: first-fit decreasing, first keeping
each unit where it sits when it still fits there (few moves), then without. Device caps that
untyped GPUs charge by where they land are kept. A packing found is a real placement of every
unit (room checked node by node on the ledger's own numbers); none found proves nothing.
The work is counted (units packed and placed), so the caller charges it to the tick's budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver.placement.cp_model import Unit
from solver.placement.plan import NodeAssignment, Plan, Spot, UnitKey
from solver.placement.problem import GPU_DIM, UNBOUNDED, Item

# What a packing costs, charged to the tick's budget in estimated seconds: per packing, and per
# unit of its neighbourhood and per unit whose nodes it searched (least squares over the 290
# packings of one tick each of M, alibaba-cold and L on this 2-core machine: 1.7 ms, 36 µs and
# 34 µs).
SECONDS_PER_PACKING = 1.7e-3
SECONDS_PER_UNIT = 3.5e-5
# A neighbourhood holds at most this many units: the packing's cost grows with them. Beyond it,
# the units of the nodes nearest to holding the action are taken (`neighbourhood`).
MAX_UNITS = 256
_NO_ROWS = np.zeros(0, dtype=np.int64)


def neighbourhood(ledger: Plan, items: list[Item], clusters: list[int]) -> list[UnitKey]:
    """The decided units with work on a pool some container of the action may use in
    `clusters`, in key order; when they are more than MAX_UNITS, those on the nodes that could
    hold one of its containers next to the running work alone, the nodes short of the least
    room first, node by node while they stay within MAX_UNITS."""
    pools = {p for item in items for c in clusters for p in item.pools[c]}
    keys: set[UnitKey] = set()
    for p in pools:
        keys |= ledger.pool_units.get(p, set())
    if len(keys) <= MAX_UNITS:
        return sorted(keys)
    return sorted(_nearest(ledger, items, clusters))


def _nearest(ledger: Plan, items: list[Item], clusters: list[int]) -> set[UnitKey]:
    """Units of the nodes that could hold a container of the action, by how short of room
    for it each node is now (the largest share of the node's room it lacks), then pool and
    node; at most MAX_UNITS, whole nodes only."""
    problem = ledger.problem
    nodes: list[tuple[float, int, int]] = []
    for item in items:
        for p in sorted({p for c in clusters for p in item.pools[c]}):
            pool = problem.pools[p]
            able = np.flatnonzero(
                np.logical_and.reduce(pool.room - pool.used >= item.request, axis=1)
            )
            bounded = pool.room < UNBOUNDED
            lacking = np.maximum(item.request - ledger.free[p][able], 0)[:, bounded]
            share = (lacking / np.maximum(pool.room[bounded], 1)).max(axis=1, initial=0.0)
            nodes.extend(zip(share.tolist(), [p] * len(able), able.tolist(), strict=True))
    keys: set[UnitKey] = set()
    for _, p, node in sorted(nodes):
        on_node = ledger.node_units.get((p, node), set()) - keys
        if len(keys) + len(on_node) > MAX_UNITS:
            break
        keys |= on_node
    return keys


@dataclass(frozen=True)
class Packed:
    """Where each unit goes, in the order of the units given (the action last)."""

    placements: list[NodeAssignment]


def repack(
    ledger: Plan, units: list[Unit], device_room: dict[tuple[int, str], int]
) -> tuple[Packed | None, float]:
    """A placement of every unit of `units` (the decided ones with their current placement as
    hint, the action last without one) on the room the others leave, and its cost in
    estimated seconds (counted work: the units, and the units whose nodes it searched)."""
    packing = _Packing(ledger, units)
    found = None
    for keep in (True, False):
        placed = packing.pack(device_room, keep)
        if placed is not None:
            found = Packed(placed)
            break
    return found, SECONDS_PER_PACKING + (len(units) + packing.placed) * SECONDS_PER_UNIT


class _Packing:
    """The nodes the units may use, one row each, and the units in the order they are packed."""

    def __init__(self, ledger: Plan, units: list[Unit]) -> None:
        problem = ledger.problem
        self.problem = problem
        self.units = units
        self.clusters = [self._clusters(unit) for unit in units]
        pools = sorted(
            {
                p
                for unit, clusters in zip(units, self.clusters, strict=True)
                for item in unit.items
                for c in clusters
                for p in item.pools[c]
            }
        )
        sizes = [len(ledger.free[p]) for p in pools]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.start = {p: int(s) for p, s in zip(pools, starts[:-1].tolist(), strict=True)}
        dims = len(problem.dims)
        # The room everything outside the packing leaves: the ledger's, plus what the
        # neighbourhood's own units hold now (they are packed anew).
        self.free = np.concatenate(
            [ledger.free[p] for p in pools] or [np.zeros((0, dims), dtype=np.int64)]
        )
        for unit in units:
            if unit.hint is None:
                continue
            for item, (p, node) in zip(unit.items, unit.hint.spots, strict=True):
                self.free[self.start[p] + node] += item.request
        self.opened = np.concatenate([ledger.opened[p] for p in pools] or [np.zeros(0, bool)])
        self.pool = np.repeat(np.array(pools, dtype=np.int64), sizes)
        self.node = np.concatenate([np.arange(s, dtype=np.int64) for s in sizes] or [_NO_ROWS])
        # Room left is compared as a share of the node's room, bounded dimensions only.
        share = [
            np.where(
                problem.pools[p].room < UNBOUNDED, 1.0 / np.maximum(problem.pools[p].room, 1), 0
            )
            for p in pools
        ]
        self.share = np.repeat(
            np.array(share, dtype=float).reshape(len(pools), dims), sizes, axis=0
        )
        self.device = {p: problem.pools[p].device or "" for p in pools}
        self._rows: dict[tuple[int, int], np.ndarray] = {}
        asked = np.sum([item.request for unit in units for item in unit.items], axis=0)
        offered = (self.free * (self.share > 0)).sum(axis=0)
        self.weight = np.where(offered > 0, asked / np.maximum(offered, 1), 0.0)
        self._shares: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self.order = sorted(range(len(units)), key=self._size)
        self.placed = 0  # units placed or tried by a search for their nodes, over the passes

    def _clusters(self, unit: Unit) -> list[int]:
        routed = self.problem.queues[unit.queue].clusters
        return [c for c in routed if all(c in item.pools for item in unit.items)]

    def _size(self, u: int) -> tuple[int, float, int]:
        """Larger first: GPUs, then what the unit asks of the scarcest resources, each
        container's request as a share of the largest node it may use, weighted by how much
        of that resource the packing asks against what its nodes have."""
        unit = self.units[u]
        gpus = sum(int(item.request[GPU_DIM]) for item in unit.items)
        share = 0.0
        for item in unit.items:
            share += float((item.request * self._smallest_share(item, u)).sum())
        return (-gpus, -share, u)

    def _smallest_share(self, item: Item, u: int) -> np.ndarray:
        """Per dimension, the weighted share of the largest node `item` may use."""
        key = (id(item.pools), tuple(self.clusters[u]))
        known = self._shares.get(key)
        if known is None:
            rows = [self._eligible(item, c) for c in self.clusters[u]]
            found = np.concatenate(rows) if rows else _NO_ROWS
            smallest = self.share[found].min(axis=0) if len(found) else np.zeros(len(self.weight))
            known = self._shares[key] = smallest * self.weight
        return known

    def _eligible(self, item: Item, cluster: int) -> np.ndarray:
        """The rows of the nodes `item` may use in `cluster`."""
        key = (id(item.pools), cluster)
        rows = self._rows.get(key)
        if rows is None:
            ranges = [
                np.arange(self.start[p], self.start[p] + len(self.problem.pools[p].used))
                for p in item.pools[cluster]
            ]
            rows = self._rows[key] = np.concatenate(ranges) if ranges else np.zeros(0, np.int64)
        return rows

    def pack(
        self, device_room: dict[tuple[int, str], int], keep: bool
    ) -> list[NodeAssignment] | None:
        free = self.free.copy()
        opened = self.opened.copy()
        room = dict(device_room)
        placed: list[NodeAssignment | None] = [None] * len(self.units)
        # Rows something landed on other than where it sat: elsewhere, a unit's own spot still
        # has its room (everything placed there so far sat there before, with it), so it stays
        # without a test, as the test would have found.
        moved: set[int] = set()
        for u in self.order:
            unit = self.units[u]
            hint = unit.hint if keep else None
            if hint is not None and self._stays(unit, hint, moved, room):
                for item, (p, node) in zip(unit.items, hint.spots, strict=True):
                    free[self.start[p] + node] -= item.request
                placed[u] = hint
                continue
            self.placed += 1
            clusters = self.clusters[u]
            if hint is not None:
                # Its own cluster first, so that a unit that still fits stays where it is.
                clusters = [hint.cluster] + [c for c in clusters if c != hint.cluster]
            for cluster in clusters:
                at = hint if hint is not None and hint.cluster == cluster else None
                spots = self._place(unit, cluster, free, opened, room, at)
                if spots is not None:
                    placed[u] = NodeAssignment(cluster, tuple(spots))
                    sat = hint.spots if hint is not None else [None] * len(spots)
                    moved.update(
                        self.start[spot[0]] + spot[1]
                        for spot, before in zip(spots, sat, strict=True)
                        if spot != before
                    )
                    break
            if placed[u] is None:
                return None
        return [p for p in placed if p is not None]

    def _stays(
        self,
        unit: Unit,
        hint: NodeAssignment,
        moved: set[int],
        room: dict[tuple[int, str], int],
    ) -> bool:
        """Whether the unit keeps its spots without a test: none of them had anything land
        on it from elsewhere, and no container charges a device cap (whose room is shared
        by the queue's units wherever they sit)."""
        for item, (p, node) in zip(unit.items, hint.spots, strict=True):
            if self.start[p] + node in moved:
                return False
            if item.untyped and (unit.queue, self.device[p]) in room:
                return False
        return True

    def _place(
        self,
        unit: Unit,
        cluster: int,
        free: np.ndarray,
        opened: np.ndarray,
        room: dict[tuple[int, str], int],
        hint: NodeAssignment | None,
    ) -> list[Spot] | None:
        """The unit's containers on nodes of `cluster` (taken from `free`, `opened` and
        `room`), or None with all three left as they were."""
        taken: list[tuple[int, np.ndarray, tuple[int, str] | None, int, bool]] = []
        spots: list[Spot] = []
        for i, item in enumerate(unit.items):
            spot = None if hint is None else hint.spots[i]
            row = self._row(item, unit.queue, cluster, free, opened, room, spot)
            if row is None:
                for r, request, charged, gpus, was_open in reversed(taken):
                    free[r] += request
                    opened[r] = was_open
                    if charged is not None:
                        room[charged] += gpus
                return None
            charged = self._charged(item, unit.queue, int(self.pool[row]), room)
            taken.append((row, item.request, charged, item.gpus, bool(opened[row])))
            free[row] -= item.request
            opened[row] = True
            if charged is not None:
                room[charged] -= item.gpus
            spots.append((int(self.pool[row]), int(self.node[row])))
        return spots

    def _charged(
        self, item: Item, queue: int, pool: int, room: dict[tuple[int, str], int]
    ) -> tuple[int, str] | None:
        """The device cap an untyped container charges on a node of `pool`, if it has one."""
        if not item.untyped:
            return None
        charged = (queue, self.device[pool])
        return charged if charged in room else None

    def _row(
        self,
        item: Item,
        queue: int,
        cluster: int,
        free: np.ndarray,
        opened: np.ndarray,
        room: dict[tuple[int, str], int],
        spot: Spot | None,
    ) -> int | None:
        """Where it sits when it still fits there, else the open node it leaves the least
        room on (as a share of the node), else the first node not up yet with room."""
        if spot is not None:
            row = self.start[spot[0]] + spot[1]
            allowed = self._allowed(item, queue, int(self.pool[row]), room)
            if allowed and (free[row] >= item.request).all():
                return row
        rows = self._eligible(item, cluster)
        fits = rows[np.logical_and.reduce(free[rows] >= item.request, axis=1)]
        if item.untyped and len(fits):
            # Pools whose device cap of the queue has no room left for it are out.
            pools = self.pool[fits]
            barred = [
                p for p in np.unique(pools).tolist() if not self._allowed(item, queue, p, room)
            ]
            if barred:
                fits = fits[~np.isin(pools, barred)]
        if not len(fits):
            return None
        up = fits[opened[fits]]
        if not len(up):
            return int(fits[0])
        left = ((free[up] - item.request) * self.share[up]).max(axis=1)
        return int(up[np.argmin(left)])

    def _allowed(self, item: Item, queue: int, pool: int, room: dict[tuple[int, str], int]) -> bool:
        charged = self._charged(item, queue, pool, room)
        return charged is None or room[charged] >= item.gpus
