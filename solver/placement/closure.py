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
from solver.placement.plan import NodeAssignment, Plan, UnitKey
from solver.placement.problem import UNBOUNDED, Item
from solver.placement.room import Packer

# What a packing costs, charged to the tick's budget in estimated seconds: per packing, and per
# unit of its neighbourhood and per unit whose nodes it searched (least squares over the 290
# packings of one tick each of M, alibaba-cold and L on this 2-core machine: 1.7 ms, 36 µs and
# 34 µs).
SECONDS_PER_PACKING = 1.7e-3
SECONDS_PER_UNIT = 3.5e-5
# A neighbourhood holds at most this many units: the packing's cost grows with them. Beyond it,
# the units of the nodes nearest to holding the action are taken (`neighbourhood`).
MAX_UNITS = 256


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
    estimated seconds (counted work: the units, and the units whose nodes it searched). The
    packing itself runs in the compiled ledger (solver.placement.room.Packer)."""
    packing = Packer(ledger.room, units)
    found = None
    for keep in (True, False):
        placed = packing.pack(device_room, keep)
        if placed is not None:
            found = Packed(
                [p if isinstance(p, NodeAssignment) else NodeAssignment(*p) for p in placed]
            )
            break
    return found, SECONDS_PER_PACKING + (len(units) + packing.placed) * SECONDS_PER_UNIT
