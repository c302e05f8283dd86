"""Room for an action best-fit refused, found by moving decided units out of its way.

Best-fit places each action on the room the decided admissions leave, and never moves
them. Often one or two of them sit on the only node the action could use and would fit just
as well elsewhere: taking them off that node, placing the action, then placing each again
(best-fit, anywhere it is eligible: any pool, any cluster) is an admission a model would
have found too, at a fraction of the cost. When the unit in the way has no other node, a
unit in its own way may move too (a swap, or a chain of two moves): on nodes whose GPUs are
all held, a big unit and a small one often trade places. A placement found this way is a
real "yes"; a repair that finds none proves nothing (the model is still asked).

Only room is tried here. A unit whose untyped GPUs count against a device cap of its queue
charges that cap by where it lands, so it is never moved by a repair; every other charge and
limit does not depend on placement.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from models.resources import EMPTY, ResourceKind, ResourceVector
from solver.placement.plan import NodeAssignment, Plan, Spot, UnitKey
from solver.placement.problem import CPU_DIM, GPU_DIM, Item, Problem

# Units tried per repair, the likeliest first: a repair is meant to be cheap next to a model
# check, and counted work keeps it reproducible. Pairs, measured at M: the model time a full
# walk of the line asks for fell from about 6.4 to 5.2 estimated seconds.
MAX_EJECTIONS = 16
MAX_PAIRS = 8
# Chains: of the first units in the action's way that found no other node, this many are
# tried with each of this many units in their own way moved too (a swap of two units, or
# one moved on to make room for the other). Measured at M and on Alibaba's cold start: 2
# finds fewer admissions ahead in the line than 4; 8 a few more, for twice the repairs' CPU
# (docs/benchmarks.md).
MAX_CHAINED = 4
# Nodes looked at for the units in a moved unit's way: 16 find the same chains as 128 at M,
# L and Alibaba's cold start, in about two thirds of the time.
CHAIN_NODES = 16
# Nodes looked at per repair (those short of the least room first), and units on each (the
# smallest first): nodes of small work hold hundreds of units (Alibaba's trace).
MAX_NODES = 128
MAX_ON_NODE = 16
# The pairs (a, b), a before b, of k units on one node, as rows, in the order of a walk.
_PAIRS = [np.transpose(np.triu_indices(k, 1)) for k in range(MAX_ON_NODE + 1)]


_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class _EligibleNodes:
    """A container's pools in some clusters, their nodes one row each, in the pools' order."""

    mapping: dict[int, list[int]]  # the item's `pools`, held so its id stays its own
    pools: list[int]
    pool: np.ndarray  # per row, its pool
    node: np.ndarray  # and its node in that pool
    base: np.ndarray  # room next to the running work alone
    room: np.ndarray  # a node's room, at least 1 on every dimension (to divide by)


@dataclass(frozen=True)
class Repair:
    """The decided units to move (to where), and where the action then goes."""

    moves: list[tuple[UnitKey, NodeAssignment]]
    placement: NodeAssignment


def charges_by_placement(problem: Problem, queue: int, items: list[Item]) -> bool:
    """Whether a unit's untyped GPUs meet a device cap of its queue: what it charges there
    depends on where it lands."""
    caps = problem.queues[queue].caps
    return any(item.untyped for item in items) and bool(caps.of_kind(ResourceKind.DEVICE))


class MovableUnits:
    """The units of one problem's ledgers a repair may move off each node, the smallest first,
    and the room each frees there: worked out once a node until its units change
    (Plan.node_stamps)."""

    def __init__(self, problem: Problem) -> None:
        # Only what the problem holds: a walk's Decider holds this, and a reference back to
        # it would keep the tick's state alive, in a cycle, until a full collection.
        self.problem = problem
        self._ranks: dict[UnitKey, tuple[int, int] | None] = {}
        self._known: dict[Spot, tuple[int, list[UnitKey], np.ndarray]] = {}
        self._nodes: dict[tuple[int, tuple[int, ...]], _EligibleNodes] = {}

    def rank(self, key: UnitKey) -> tuple[int, int] | None:
        """A unit's size (GPUs, then CPU), for a repair to try the smallest first; None when
        its charges depend on where it lands (charges_by_placement): it never moves."""
        if key not in self._ranks:
            kind, index = key
            unit = self.problem.envs[index] if kind == "env" else self.problem.actions[index]
            self._ranks[key] = (
                None
                if charges_by_placement(self.problem, unit.queue, unit.items)
                else (
                    sum(int(item.request[GPU_DIM]) for item in unit.items),
                    sum(int(item.request[CPU_DIM]) for item in unit.items),
                )
            )
        return self._ranks[key]

    def eligible_nodes(self, item: Item, clusters: list[int]) -> _EligibleNodes:
        """The nodes of the container's pools in `clusters`, worked out once."""
        key = (id(item.pools), tuple(clusters))
        known = self._nodes.get(key)
        if known is not None and known.mapping is item.pools:
            return known
        problem = self.problem
        pools = [p for c in clusters for p in item.pools[c]]
        infos = [problem.pools[p] for p in pools]
        sizes = [pool.max_nodes for pool in infos]
        dims = len(problem.dims)
        known = self._nodes[key] = _EligibleNodes(
            item.pools,
            pools,
            np.repeat(np.array(pools, dtype=np.int64), sizes),
            np.concatenate([np.arange(size, dtype=np.int64) for size in sizes] or [_NO_ROWS]),
            np.concatenate([pool.room - pool.used for pool in infos] or [np.zeros((0, dims))]),
            np.concatenate(
                [np.broadcast_to(np.maximum(pool.room, 1), pool.used.shape) for pool in infos]
                or [np.ones((0, dims))]
            ),
        )
        return known

    def on_node(self, ledger: Plan, p: int, node: int) -> tuple[list[UnitKey], np.ndarray]:
        """At most MAX_ON_NODE units of the node, the smallest first (then by key), and what
        each frees there by leaving, one row a unit."""
        stamp = ledger.node_stamps.get((p, node), 0)
        known = self._known.get((p, node))
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        ranked = heapq.nsmallest(
            MAX_ON_NODE,
            (
                (size, key)
                for key in ledger.node_units[(p, node)]
                if (size := self.rank(key)) is not None
            ),
        )
        keys = [key for _, key in ranked]
        freed = np.zeros((len(keys), ledger.free[p].shape[1]), dtype=ledger.free[p].dtype)
        for row, key in enumerate(keys):
            _, unit_items, placement = ledger.unit(key)
            for unit_item, spot in zip(unit_items, placement.spots, strict=True):
                if spot == (p, node):
                    freed[row] += unit_item.request
        self._known[(p, node)] = (stamp, keys, freed)
        return keys, freed


def repair(
    ledger: Plan,
    queue: int,
    items: list[Item],
    charge: ResourceVector,
    clusters: list[int],
    movable: MovableUnits,
) -> Repair | None:
    """A placement of `items` (a unit of `queue` charging `charge`) after moving one or two
    decided units, or None when none of those tried makes room. The two may be a chain: a
    unit in the action's way, and one in the way of that unit's move."""
    groups = _in_the_way(ledger, items, clusters, movable)
    for group in groups:
        found = _moved_out(ledger, group, queue, items, charge)
        if found is not None:
            return found
    for (unit,) in [group for group in groups if len(group) == 1][:MAX_CHAINED]:
        unit_queue, unit_items, _ = ledger.unit(unit)
        unit_clusters = ledger.candidate_clusters(unit_items, unit_queue)
        behind = [
            group
            for group in _in_the_way(ledger, unit_items, unit_clusters, movable, CHAIN_NODES, 0)
            if group[0] != unit
        ]
        for (other,) in behind[:MAX_CHAINED]:
            found = _moved_out(ledger, (unit, other), queue, items, charge)
            if found is not None:
                return found
    return None


def _moved_out(
    ledger: Plan,
    group: tuple[UnitKey, ...],
    queue: int,
    items: list[Item],
    charge: ResourceVector,
) -> Repair | None:
    """Take the units of `group` off their nodes, place the action, then each unit again."""
    units = [ledger.unit(key) for key in group]
    for _, unit_items, old in units:
        ledger.hold(unit_items, old, -1)
    placement = ledger.best_placement(queue, items, charge)
    held: list[tuple[list[Item], NodeAssignment]] = []
    moves: list[tuple[UnitKey, NodeAssignment]] = []
    if placement is not None:
        held.append((items, placement))
        ledger.hold(items, placement, +1)
        for key, (unit_queue, unit_items, old) in zip(group, units, strict=True):
            # Its charges are already counted in its queue's use: only its room moves.
            moved = ledger.best_placement(unit_queue, unit_items, EMPTY)
            if moved is None:
                break
            held.append((unit_items, moved))
            ledger.hold(unit_items, moved, +1)
            if moved != old:
                moves.append((key, moved))
    for unit_items, spot in held:
        ledger.hold(unit_items, spot, -1)
    for _, unit_items, old in units:
        ledger.hold(unit_items, old, +1)
    if placement is None or len(held) < len(group) + 1:
        return None
    return Repair(moves, placement)


def _in_the_way(
    ledger: Plan,
    items: list[Item],
    clusters: list[int],
    movable: MovableUnits,
    most_nodes: int = MAX_NODES,
    most_pairs: int = MAX_PAIRS,
) -> list[tuple[UnitKey, ...]]:
    """Decided units that leave room for one of the containers on a node they sit on, once
    gone: node by node, those short of the least room first, and on a node the smallest
    unit first (the easiest to place again), over at most `most_nodes` nodes; at most
    MAX_EJECTIONS of them, then at most `most_pairs` pairs of units on one node that leave
    room together (and neither alone)."""
    shares: list[np.ndarray] = []  # per container, its nodes short of room: how far short,
    pools: list[np.ndarray] = []  # the pool,
    nodes: list[np.ndarray] = []  # the node,
    containers: list[np.ndarray] = []  # and which container
    for k, item in enumerate(items):
        # Every node of its pools at once, in the order of its clusters and their pools.
        eligible = movable.eligible_nodes(item, clusters)
        if not eligible.pools:
            continue
        free = np.concatenate([ledger.free[p] for p in eligible.pools])
        # Nodes without room for it now that would have it next to the running work.
        short = np.maximum(item.request - free, 0)
        rows = np.flatnonzero((eligible.base >= item.request).all(axis=1) & short.any(axis=1))
        # How far short, as the largest share of a node's room on one dimension.
        shares.append((short[rows] / eligible.room[rows]).max(axis=1))
        pools.append(eligible.pool[rows])
        nodes.append(eligible.node[rows])
        containers.append(np.full(len(rows), k))
    if not shares:
        return []
    pool_of, node_of = np.concatenate(pools), np.concatenate(nodes)
    # The least short first, then by pool and node; a stable sort keeps the containers' order.
    order = np.lexsort((node_of, pool_of, np.concatenate(shares))).tolist()
    pool_of, node_of = pool_of.tolist(), node_of.tolist()
    container_of = np.concatenate(containers).tolist()
    # Every unit of the nodes looked at, one row a unit in the nodes' order, tested together:
    # the first of each list found in that order are those a walk node by node would find.
    keys: list[UnitKey] = []
    freed: list[np.ndarray] = []
    node_free: list[np.ndarray] = []  # per node with units, its free room now
    node_container: list[int] = []  # and the container it is short for
    counts: list[int] = []
    looked_at = 0
    for row in order:
        if looked_at == most_nodes:
            break
        p, node = pool_of[row], node_of[row]
        if (p, node) not in ledger.node_units:
            continue
        looked_at += 1
        on_node, frees = movable.on_node(ledger, p, node)
        if not on_node:
            continue
        keys += on_node
        freed.append(frees)
        node_free.append(ledger.free[p][node])
        node_container.append(container_of[row])
        counts.append(len(on_node))
    if not keys:
        return []
    unit_frees = np.concatenate(freed)
    requests = np.array([item.request for item in items])
    lacking = requests[node_container] - np.array(node_free)  # what each node lacks
    node_lacks = np.repeat(lacking, counts, axis=0)  # a row a unit, as unit_frees
    alone = np.all(unit_frees >= node_lacks, axis=1)
    singles: list[tuple[UnitKey, ...]] = []
    seen: set[UnitKey] = set()
    for row in np.flatnonzero(alone).tolist():
        if keys[row] not in seen:
            seen.add(keys[row])
            singles.append((keys[row],))
            if len(singles) == MAX_EJECTIONS:
                break
    if not most_pairs:
        return singles
    # The pairs of each node's units, numbered as rows of unit_frees.
    pairs_on = [_PAIRS[count] for count in counts]
    starts = np.repeat(np.cumsum(counts) - counts, [len(rows) for rows in pairs_on])
    first, second = (np.concatenate(pairs_on) + starts[:, None]).T
    together = np.all(unit_frees[first] + unit_frees[second] >= node_lacks[first], axis=1)
    together &= ~alone[first] & ~alone[second]
    chosen = np.flatnonzero(together)[:most_pairs]
    pairs = [
        (keys[a], keys[b])
        for a, b in zip(first[chosen].tolist(), second[chosen].tolist(), strict=True)
    ]
    return singles + pairs
