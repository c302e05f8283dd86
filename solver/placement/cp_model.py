"""The tick's CP-SAT model: can these units all be placed on nodes at once?

`solver.tick` fixes admissions in global order; when best-fit cannot place an
action, it asks this model whether the action fits together with the
admissions already decided, letting every decided admission that shares
nodes with it move (to any node, pool or cluster it may use). Caps and
concurrency are settled before the model, exactly, except the one charge
that depends on placement: an untyped GPU counts against the cap of the
device it lands on, so those caps are constraints here.

The model is written straight into its proto, with numpy deciding which
(container, node) pairs fit and which node-room sums can bind: models reach 10^5
variables, and through the expression API they cost about 13 µs per variable to
build; written this way, about 1 µs per variable plus 1 ms per model (measured
on the benchmark's M and Alibaba models; docs/benchmarks.md, "Figures behind the design").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from ortools.sat.python import cp_model_helper

from solver.placement.plan import NodeAssignment, Spot
from solver.placement.problem import UNBOUNDED, Item, Problem

INT64_MIN = -(2**63)  # the lower end of "sum <= bound", as OR-Tools writes it
NONE = -1  # no pool, node or item: a variable that chooses a cluster
# Estimated wall seconds per deterministic second, so a tick's budget stays reproducible and
# still lasts about as long as its limit says (2-core machine): the complete search took about
# 2.3 on these models; local search about 1.2 (1.16-1.18 over the M and L ticks' local
# searches, loading included; docs/benchmarks.md).
SECONDS_PER_DETERMINISTIC = 2.3
LOCAL_SECONDS_PER_DETERMINISTIC = 1.2
# Estimated seconds of complete search a model whose "no" proves nothing gets before local
# search takes over: the small models' answers (most take under 0.005 deterministic seconds,
# either way) and no more (docs/decisions.md, D446).
COMPLETE_SEARCH_FIRST_S = 0.012
# Above this many variables that start settles nothing (at M, L and Alibaba's cold start, none
# above 1,201) and loading the model twice costs more than it: local search starts at once.
COMPLETE_SEARCH_FIRST_VARIABLES = 2_000


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
    hint: NodeAssignment | None = None


@dataclass(frozen=True)
class Scope:
    """Keep every unit of a model inside one cluster and these pools of it."""

    cluster: int
    pools: frozenset[int]


@dataclass
class _Layout:
    """What each Boolean variable means, one entry per variable index.

    Variables come unit by unit: the unit's clusters, then for each container its
    (pool, node) choices, cluster by cluster, so each (container, cluster) is a range.
    """

    unit: np.ndarray  # unit index
    item: np.ndarray  # container index over all units (`first_item`), NONE for a cluster
    cluster: np.ndarray
    pool: np.ndarray  # NONE for a cluster
    node: np.ndarray  # NONE for a cluster
    first_item: list[int]  # per unit, the index of its first container
    requests: np.ndarray  # (containers, dims)
    # (cluster variable, first, end): a container's choices in that cluster
    ranges: list[tuple[int, int, int]]


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
        # A bare proto: CpModel's constructor adds its deprecated aliases one by one (about
        # 1 ms a model), and nothing here uses its expression API.
        self.proto = cp_model_helper.CpModelProto()
        # Variables and constraints come in the order the expression API used to add them:
        # the search depends on the order, and this way a model is the one it always was.
        self.layout = self._variables(self._slots(opened))
        self._container_on_one_node()
        self._node_room()
        self._device_caps(device_room)
        self._hint()

    def _slots(self, opened: list[np.ndarray]) -> dict[int, np.ndarray]:
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
            slots[p] = np.concatenate([used, fresh])
        return slots

    def _variables(self, slots: dict[int, np.ndarray]) -> _Layout:
        """Each unit's clusters, each container's nodes with room, and one exactly-one per unit.

        Every (container, pool) pair offers all the pool's slots as candidates, and one
        comparison over all candidates keeps those with room; a cluster is a pair of its
        own with one candidate that always fits, so the variables keep their unit order.
        """
        pools = sorted(slots)
        local = {p: i for i, p in enumerate(pools)}
        local[NONE] = len(pools)  # a cluster: one candidate, always with room
        sizes = np.array([len(slots[p]) for p in pools] + [1], dtype=np.int64)
        dims = len(self.problem.dims)
        nodes = np.concatenate([*(slots[p] for p in pools), [NONE]]).astype(np.int64)
        room = np.concatenate(
            [*(self.free[p][slots[p]] for p in pools), np.full((1, dims), UNBOUNDED)]
        )
        pair_unit: list[int] = []
        pair_item: list[int] = []
        pair_cluster: list[int] = []
        pair_pool: list[int] = []
        choices: list[list[int]] = []  # per unit, the pairs of its clusters
        ranges: list[tuple[int, int, int]] = []  # per container and cluster, in pairs
        first_item: list[int] = []
        requests: list[np.ndarray] = []

        def pair(unit: int, item: int, cluster: int, pool: int) -> None:
            pair_unit.append(unit)
            pair_item.append(item)
            pair_cluster.append(cluster)
            pair_pool.append(pool)

        for u, unit in enumerate(self.units):
            routed = self.problem.queues[unit.queue].clusters
            clusters = [c for c in routed if all(c in item.pools for item in unit.items)]
            if self.scope is not None:
                clusters = [c for c in clusters if c == self.scope.cluster]
            chosen = []
            for c in clusters:
                chosen.append(len(pair_pool))
                pair(u, NONE, c, NONE)
            choices.append(chosen)
            first_item.append(len(requests))
            for item in unit.items:
                g = len(requests)
                requests.append(item.request)
                for c, chosen_c in zip(clusters, chosen, strict=True):
                    first = len(pair_pool)
                    for p in item.pools[c]:
                        if self.scope is None or p in self.scope.pools:
                            pair(u, g, c, p)
                    ranges.append((chosen_c, first, len(pair_pool)))
        wanted = np.array([*requests, np.zeros(dims, dtype=np.int64)], dtype=np.int64)
        wanted = wanted.reshape(-1, dims)  # the last row, NONE: what a cluster asks for
        pool_of = np.array([local[p] for p in pair_pool], dtype=np.int64)
        counts = sizes[pool_of]
        candidate_pair = np.repeat(np.arange(len(counts)), counts)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        slot = np.repeat(offsets[pool_of] - np.cumsum(counts) + counts, counts)
        slot += np.arange(len(slot))
        item_of = np.array(pair_item, dtype=np.int64)
        fits = (room[slot] >= wanted[item_of[candidate_pair]]).all(axis=1)
        kept_pair, kept_slot = candidate_pair[fits], slot[fits]
        # variable index where each pair's variables start (and, last, how many there are)
        edges = np.concatenate([[0], np.cumsum(np.bincount(kept_pair, minlength=len(counts)))])
        edges = edges.tolist()
        self.proto.variables.extend([_boolean()] * edges[-1])
        constraints = self.proto.constraints
        for chosen in choices:
            # Empty when no cluster is allowed: the model is then infeasible, as it must be.
            constraints.add().exactly_one.literals.extend([edges[i] for i in chosen])
        return _Layout(
            unit=np.array(pair_unit, dtype=np.int64)[kept_pair],
            item=item_of[kept_pair],
            cluster=np.array(pair_cluster, dtype=np.int64)[kept_pair],
            pool=np.array(pair_pool, dtype=np.int64)[kept_pair],
            node=nodes[kept_slot],
            first_item=first_item,
            requests=wanted[:-1],
            ranges=[(edges[chosen], edges[first], edges[end]) for chosen, first, end in ranges],
        )

    def _container_on_one_node(self) -> None:
        """Each container sits on exactly one node, in the cluster its unit chose."""
        constraints = self.proto.constraints
        for chosen, first, end in self.layout.ranges:
            linear = constraints.add().linear
            if end == first:
                linear.vars.append(chosen)  # nowhere to go in that cluster: it is not chosen
                linear.coeffs.append(1)
            else:
                linear.vars.append(chosen)
                linear.vars.extend(range(first, end))
                linear.coeffs.append(-1)
                linear.coeffs.extend([1] * (end - first))
            linear.domain.extend((0, 0))

    def _node_room(self) -> None:
        """Containers on a node fit the room everything fixed left on it.

        Only sums that can exceed the room become constraints; they come node by node in
        the order the nodes first appear among the variables, then by dimension.
        """
        layout = self.layout
        spots = np.flatnonzero(layout.item != NONE)
        if not len(spots):
            return
        pool, node = layout.pool[spots], layout.node[spots]
        pools = np.unique(pool)
        local = np.searchsorted(pools, pool)
        sizes = np.array([len(self.free[p]) for p in pools])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        free = np.concatenate([self.free[p] for p in pools])
        bounded = np.array([self.problem.pools[p].room < UNBOUNDED for p in pools])
        key = offsets[local] + node
        _, first_seen, inverse = np.unique(key, return_index=True, return_inverse=True)
        rank = np.empty(len(first_seen), dtype=np.int64)
        rank[np.argsort(first_seen, kind="stable")] = np.arange(len(first_seen))
        order = np.argsort(rank[inverse], kind="stable")  # keeps variable order within a node
        terms = spots[order]
        weights = layout.requests[layout.item[terms]]
        starts = np.flatnonzero(np.diff(rank[inverse][order], prepend=-1))
        ends = np.append(starts[1:], len(terms))
        sums = np.add.reduceat(weights, starts, axis=0)
        nodes = key[order][starts]
        binding = bounded[local[order][starts]] & (sums > free[nodes])
        which, dims = np.nonzero(binding)  # node by node, then by dimension
        lengths = ends[which] - starts[which]
        at = np.repeat(starts[which] - np.cumsum(lengths) + lengths, lengths)
        at += np.arange(len(at))
        _add_sums_at_most(
            self.proto,
            terms[at],
            weights[at, np.repeat(dims, lengths)],
            lengths,
            free[nodes[which], dims],
        )

    def _device_caps(self, device_room: dict[tuple[int, str], int]) -> None:
        """An untyped GPU counts against the cap of the device type it lands on."""
        layout = self.layout
        items = [item for unit in self.units for item in unit.items]
        queues = np.array([unit.queue for unit in self.units], dtype=np.int64)
        untyped = np.array([item.untyped for item in items] + [False])  # NONE: a cluster
        gpus = np.array([item.gpus for item in items] + [0], dtype=np.int64)
        devices = np.array([pool.device or "" for pool in self.problem.pools] + [""])
        on = devices[layout.pool]  # NONE: a cluster, on no device
        charged = untyped[layout.item]
        terms = [
            np.flatnonzero(charged & (queues[layout.unit] == q) & (on == device))
            for q, device in device_room
        ]
        lits = np.concatenate(terms) if terms else np.zeros(0, dtype=np.int64)
        _add_sums_at_most(
            self.proto,
            lits,
            gpus[layout.item[lits]],
            np.array([len(t) for t in terms], dtype=np.int64),
            np.array(list(device_room.values()), dtype=np.int64),
        )

    def _hint(self) -> None:
        """Every unit placed before this model starts where it is (the candidate has no hint)."""
        layout = self.layout
        hinted = np.array([unit.hint is not None for unit in self.units] + [False])
        if not hinted.any():
            return
        clusters = np.array([u.hint.cluster if u.hint else NONE for u in self.units] + [NONE])
        spots: list[Spot] = []
        for unit in self.units:
            wanted = unit.hint.spots if unit.hint else [(NONE, NONE)] * len(unit.items)
            spots.extend(spot for _, spot in zip(unit.items, wanted, strict=True))
        at = np.array([*spots, (NONE, NONE)], dtype=np.int64).reshape(-1, 2)  # NONE: a cluster
        values = np.where(
            layout.item == NONE,
            layout.cluster == clusters[layout.unit],
            (layout.pool == at[layout.item, 0]) & (layout.node == at[layout.item, 1]),
        )
        chosen = np.flatnonzero(hinted[layout.unit])
        self.proto.solution_hint.vars.extend(chosen.tolist())
        self.proto.solution_hint.values.extend(values[chosen].astype(np.int64).tolist())

    @property
    def num_variables(self) -> int:
        return len(self.proto.variables)

    def solve(
        self, limit_s: float, seed: int, proving: bool
    ) -> tuple[Feasibility, list[NodeAssignment], float]:
        """The verdict, the placements when feasible, and the estimated seconds it took.

        `proving`: whether the caller takes a "no" as a proof. When it does not, a small
        model's complete search gets a short start, which settles those either way, and
        local search from the hint has the rest of `limit_s`: placements that need a few
        decided units to trade nodes are its strength, where the complete search spends
        its whole limit without an answer (docs/engine/exactness.md).
        """
        response = None
        spent = 0.0
        if proving or self.num_variables <= COMPLETE_SEARCH_FIRST_VARIABLES:
            limit = limit_s if proving else min(limit_s, COMPLETE_SEARCH_FIRST_S)
            response = self._search(limit / SECONDS_PER_DETERMINISTIC, seed, local=False)
            spent = response.deterministic_time * SECONDS_PER_DETERMINISTIC
        left = limit_s - spent
        undecided = response is None or response.status == cp_model_helper.UNKNOWN
        if undecided and not proving and left > 0:
            response = self._search(left / LOCAL_SECONDS_PER_DETERMINISTIC, seed, local=True)
            spent += response.deterministic_time * LOCAL_SECONDS_PER_DETERMINISTIC
        if response is None:
            return Feasibility.UNKNOWN, [], spent
        if response.status in (cp_model_helper.OPTIMAL, cp_model_helper.FEASIBLE):
            values = np.array(response.solution, dtype=np.int64)
            return Feasibility.FEASIBLE, self._placements(values), spent
        if response.status == cp_model_helper.INFEASIBLE:
            return Feasibility.INFEASIBLE, [], spent
        return Feasibility.UNKNOWN, [], spent

    def _search(
        self, deterministic_limit: float, seed: int, local: bool
    ) -> cp_model_helper.CpSolverResponse:
        """One CP-SAT run: the complete search, or (`local`) local search alone."""
        parameters = cp_model_helper.SatParameters()
        parameters.num_workers = 1  # deterministic, and the machine runs a service too
        parameters.random_seed = seed
        parameters.max_deterministic_time = max(deterministic_limit, 0.001)
        # These models are small and hinted; presolve costs more than it saves here and can
        # drop a feasible hint (measured: twice the checks per second; docs/benchmarks.md).
        parameters.cp_model_presolve = False
        # Without presolve the search makes no use of the symmetries CP-SAT detects, yet the
        # detection still runs, on wall time the deterministic limit does not count (measured
        # on 1,000 models from the benchmarks and the oracle tests: the same answers and the
        # same deterministic time without it, 10-50% less wall time per solve).
        parameters.symmetry_level = 0
        if local:
            parameters.use_ls_only = True
            # Local search checks its limit once a batch (0.1 deterministic seconds unless
            # told): one batch of exactly the limit keeps the charge to what was granted.
            parameters.feasibility_jump_batch_dtime = parameters.max_deterministic_time
        solver = cp_model_helper.SolveWrapper()
        solver.set_parameters(parameters)
        return solver.solve(self.proto)

    def _placements(self, values: np.ndarray) -> list[NodeAssignment]:
        """Each unit's chosen cluster and each container's node, from a feasible solution."""
        layout = self.layout
        true = np.flatnonzero(values)
        cluster_of: dict[int, int] = {}
        spot_of: dict[int, Spot] = {}
        # Exactly one of each is true; setdefault keeps the first, should that ever change.
        for var in true.tolist():
            item = int(layout.item[var])
            if item == NONE:
                cluster_of.setdefault(int(layout.unit[var]), int(layout.cluster[var]))
            else:
                spot_of.setdefault(item, (int(layout.pool[var]), int(layout.node[var])))
        return [
            NodeAssignment(
                cluster_of[u],
                tuple(spot_of[layout.first_item[u] + i] for i in range(len(unit.items))),
            )
            for u, unit in enumerate(self.units)
        ]


def _boolean() -> cp_model_helper.IntegerVariableProto:
    variable = cp_model_helper.IntegerVariableProto()
    variable.domain.extend((0, 1))
    return variable


def _add_sums_at_most(
    proto: cp_model_helper.CpModelProto,
    lits: np.ndarray,
    weights: np.ndarray,
    lengths: np.ndarray,
    bounds: np.ndarray,
) -> None:
    """sum(w * lit) <= bound over each run of `lengths` terms, in order.

    A sum that cannot exceed its bound is left out; the others are divided by the common
    divisor of their weights (memory is in bytes, and small coefficients solve faster).
    """
    group = np.repeat(np.arange(len(lengths)), lengths)
    nonzero = weights != 0
    lits, weights, group = lits[nonzero], weights[nonzero], group[nonzero]
    counts = np.bincount(group, minlength=len(lengths))
    sums = _by_run(np.add, weights, counts, 0)
    kept = sums > bounds
    if not kept.any():
        return
    lits, weights, counts = lits[kept[group]], weights[kept[group]], counts[kept]
    divisors = _by_run(np.gcd, weights, counts, 1)
    coeffs = (weights // np.repeat(divisors, counts)).tolist()
    limits = (bounds[kept] // divisors).tolist()
    starts = np.cumsum(counts) - counts
    variables = lits.tolist()
    edges = [*starts.tolist(), len(variables)]
    constraints = proto.constraints
    for i, limit in enumerate(limits):
        linear = constraints.add().linear
        linear.vars.extend(variables[edges[i] : edges[i + 1]])
        linear.coeffs.extend(coeffs[edges[i] : edges[i + 1]])
        linear.domain.extend((INT64_MIN, limit))


def _by_run(ufunc: np.ufunc, values: np.ndarray, counts: np.ndarray, empty: int) -> np.ndarray:
    """`ufunc` reduced over each run of `counts` values; `empty` for a run of none."""
    out = np.full(len(counts), empty, dtype=np.int64)
    some = counts > 0
    if some.any():
        out[some] = ufunc.reduceat(values, (np.cumsum(counts) - counts)[some])
    return out
