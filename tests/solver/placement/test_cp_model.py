"""The placement model, written straight into CP-SAT's proto, against its plain reading.

solver/placement/cp_model.py writes variables and constraints in bulk for speed. These tests pin
down that the model it writes is the model the seed asks for: the same proto, constraint for
constraint, as the obvious expression-API build of "each unit in one allowed cluster, each
container on one node of it with room, untyped GPUs under the caps of the devices they
land on", on every model the engine builds for random snapshots; and exact answers on
small cases where the order of placement decides what fits.
"""

from __future__ import annotations

import random
from math import gcd
from typing import Any

import numpy as np
import pytest
from ortools.sat.python import cp_model

import solver.placement.decide
from solver import TickOptions, tick
from solver.placement.bounds import RoomBounds
from solver.placement.cp_model import Feasibility, PlacementModel, Scope, Unit
from solver.placement.plan import NodeAssignment
from solver.placement.problem import UNBOUNDED, Problem, compile_snapshot
from tests.support.builders import SnapshotBuilder
from tests.support.generate import PACKING, SMALL, random_snapshot


def expression_model(
    problem: Problem,
    units: list[Unit],
    free: list[np.ndarray],
    opened: list[np.ndarray],
    device_room: dict[tuple[int, str], int],
    scope: Scope | None,
) -> cp_model.CpModel:
    """The placement model through CP-SAT's expression API, one term at a time."""
    model = cp_model.CpModel()
    in_scope = [
        [(c, p) for c in item.pools for p in item.pools[c] if scope is None or p in scope.pools]
        for unit in units
        for item in unit.items
    ]
    wanting: dict[int, int] = {}
    for pairs in in_scope:
        for _, p in pairs:
            wanting[p] = wanting.get(p, 0) + 1
    slots = {
        p: [*np.flatnonzero(opened[p]), *np.flatnonzero(~opened[p])[:count]]
        for p, count in wanting.items()
    }
    chosen: list[dict[int, cp_model.IntVar]] = []
    spots: list[list[list[tuple[int, int, cp_model.IntVar]]]] = []
    for unit in units:
        allowed = [
            c
            for c in problem.queues[unit.queue].clusters
            if all(c in item.pools for item in unit.items) and (scope is None or c == scope.cluster)
        ]
        chosen.append({c: model.new_bool_var("") for c in allowed})
        model.add_exactly_one(chosen[-1].values())
        spots.append(
            [
                [
                    (p, int(node), model.new_bool_var(""))
                    for c in allowed
                    for p in item.pools[c]
                    if scope is None or p in scope.pools
                    for node in slots[p]
                    if (free[p][node] >= item.request).all()
                ]
                for item in unit.items
            ]
        )
    for unit_chosen, unit_spots in zip(chosen, spots, strict=True):
        for item_spots in unit_spots:
            for c, lit in unit_chosen.items():
                cluster = set(problem.pools_of_cluster[c])
                model.add(sum(x for p, _, x in item_spots if p in cluster) == lit)

    def at_most(weighted: list[tuple[int, cp_model.IntVar]], bound: int) -> None:
        weighted = [(w, x) for w, x in weighted if w]
        if sum(w for w, _ in weighted) > bound:
            divisor = 0
            for w, _ in weighted:
                divisor = gcd(divisor, w)
            model.add(sum(w // divisor * x for w, x in weighted) <= bound // divisor)

    on_node: dict[tuple[int, int], list[tuple[np.ndarray, cp_model.IntVar]]] = {}
    for unit, unit_spots in zip(units, spots, strict=True):
        for item, item_spots in zip(unit.items, unit_spots, strict=True):
            for p, node, x in item_spots:
                on_node.setdefault((p, node), []).append((item.request, x))
    for (p, node), placed in on_node.items():
        for d, room in enumerate(problem.pools[p].room):
            if room < UNBOUNDED:
                at_most([(int(r[d]), x) for r, x in placed], int(free[p][node, d]))
    for (q, device), room in device_room.items():
        at_most(
            [
                (item.gpus, x)
                for unit, unit_spots in zip(units, spots, strict=True)
                if unit.queue == q
                for item, item_spots in zip(unit.items, unit_spots, strict=True)
                if item.untyped
                for p, _, x in item_spots
                if problem.pools[p].device == device
            ],
            room,
        )
    for unit, unit_chosen, unit_spots in zip(units, chosen, spots, strict=True):
        if unit.hint is not None:
            for c, lit in unit_chosen.items():
                model.add_hint(lit, c == unit.hint.cluster)
            for item_spots, spot in zip(unit_spots, unit.hint.spots, strict=True):
                for p, node, x in item_spots:
                    model.add_hint(x, (p, node) == spot)
    return model


@pytest.mark.slow
def test_the_written_model_is_the_expression_model_for_every_check_of_random_ticks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seed: "Each container the action asks for must fit on a node of some node pool in the
    # cluster: its requests fit one node" and "If it chooses a device that has its own cap,
    # the request counts against that cap as well." The random snapshots of the oracle tests
    # give models with several clusters per unit, device caps and hints.
    compared: list[int] = []

    class Checked(PlacementModel):
        def __init__(self, problem: Problem, units: list[Unit], *inputs: Any) -> None:
            super().__init__(problem, units, *inputs)
            assert str(self.proto) == str(expression_model(problem, units, *inputs).proto)
            compared.append(len(units))

    monkeypatch.setattr(solver.placement.decide, "PlacementModel", Checked)
    # The bounds settle most of these refusals without a model; here every check is a model.
    monkeypatch.setattr(RoomBounds, "refutes", lambda *_: False)
    for size, count in ((SMALL, 300), (PACKING, 150)):
        for seed in range(count):
            tick(random_snapshot(random.Random(seed), size), TickOptions(time_limit_s=5.0))
    assert len(compared) > 50, compared


def _h100_problem(gpus_running: list[int], extra_pool: bool = False) -> Problem:
    """One cluster of 8-GPU H100 nodes, node i holding gpus_running[i] GPUs of running work."""
    snap = SnapshotBuilder().queue("q").queue("r").cluster("c")
    snap.pool("h100", cpu="96", memory="1Ti", accelerator="H100", accelerators=8, nodes=2)
    if extra_pool:
        snap.pool("l4", cpu="48", memory="192Gi", accelerator="L4", accelerators=4, nodes=1)
    for node, gpus in enumerate(gpus_running):
        snap.running(f"old-{node}", queue="q", gpu=gpus, on=("c", "h100", node))
    snap.queued("a", queue="q", gpu=4).queued("b", queue="q", gpu=6).queued("c", queue="q", gpu=7)
    snap.queued("d", queue="r", gpu=4)
    return compile_snapshot(snap.build())


def _check(
    problem: Problem,
    hinted: list[tuple[int, NodeAssignment]],
    candidate: int,
    device_room: dict[tuple[int, str], int] | None = None,
) -> tuple[Feasibility, list[NodeAssignment]]:
    """Place action `candidate` with the hinted actions free to move; (verdict, placements)."""
    free = [pool.room - pool.used for pool in problem.pools]
    opened = [np.arange(pool.max_nodes) < pool.nodes for pool in problem.pools]
    units = [
        Unit(("action", i), problem.actions[i].queue, problem.actions[i].items, hint)
        for i, hint in hinted
    ]
    action = problem.actions[candidate]
    units.append(Unit(("action", candidate), action.queue, action.items))
    model = PlacementModel(problem, units, free, opened, device_room or {})
    verdict, placements, _ = model.solve(5.0, 0, proving=True)
    return verdict, placements


def test_a_placed_action_moves_so_that_a_larger_one_fits() -> None:
    # Seed: "Each container the action asks for must fit on a node ...: its requests fit one
    # node". Node 0 has 4 GPUs free, node 1 has 6. The 4-GPU action sits on node 1 (the hint),
    # so the 6-GPU action fits only if the 4-GPU one moves to node 0: exactly one packing.
    problem = _h100_problem([4, 2])
    by_id = {a.id: a.index for a in problem.actions}
    verdict, placements = _check(problem, [(by_id["a"], NodeAssignment(0, ((0, 1),)))], by_id["b"])
    assert verdict is Feasibility.FEASIBLE
    assert placements == [NodeAssignment(0, ((0, 0),)), NodeAssignment(0, ((0, 1),))]


def test_no_packing_means_infeasible() -> None:
    # 10 GPUs free in all, but a 7-GPU container fits no node next to the 4-GPU action:
    # node 0 has 4 free, and node 1 has 6.
    problem = _h100_problem([4, 2])
    by_id = {a.id: a.index for a in problem.actions}
    verdict, placements = _check(problem, [(by_id["a"], NodeAssignment(0, ((0, 1),)))], by_id["c"])
    assert (verdict, placements) == (Feasibility.INFEASIBLE, [])


def test_an_untyped_gpu_leaves_a_device_whose_cap_is_spent() -> None:
    # Seed: "If it chooses a device that has its own cap, the request counts against that cap
    # as well." Queue q has no L4 room left; queue r has no L4 cap. So q's untyped 4-GPU
    # action cannot go to the L4 node, r's may stay there, and q's 6-GPU action takes the
    # H100 node with 6 free.
    problem = _h100_problem([4, 2], extra_pool=True)
    by_id = {a.id: a.index for a in problem.actions}
    l4 = next(p.index for p in problem.pools if p.name == "l4")
    q = problem.actions[by_id["a"]].queue
    device = problem.pools[l4].device
    assert device is not None
    hinted = [
        (by_id["a"], NodeAssignment(0, ((0, 0),))),
        (by_id["d"], NodeAssignment(0, ((l4, 0),))),
    ]
    verdict, placements = _check(problem, hinted, by_id["b"], {(q, device): 0})
    assert verdict is Feasibility.FEASIBLE
    assert placements == [
        NodeAssignment(0, ((0, 0),)),
        NodeAssignment(0, ((l4, 0),)),
        NodeAssignment(0, ((0, 1),)),
    ]


def test_a_check_whose_no_proves_nothing_finds_a_trade_of_nodes_by_local_search() -> None:
    # Seed: "Each container the action asks for must fit on a node ...". Forty pairs of 8-GPU
    # nodes: one of each pair holds two 3-GPU actions, the other a 5-GPU and a 1-GPU one; a
    # 4-GPU action fits only once a 3 and the 5 trade places (8 used on one node, 4 on the
    # other). The complete search given the same limit ends without an answer on this model;
    # local search from where the actions are finds the trade.
    pairs = 40
    snap = SnapshotBuilder().queue("q").cluster("c")
    snap.pool("h100", cpu="96", memory="1Ti", accelerator="H100", accelerators=8, nodes=2 * pairs)
    for i in range(pairs):
        snap.queued(f"a{i}", queue="q", gpu=3).queued(f"b{i}", queue="q", gpu=3)
        snap.queued(f"c{i}", queue="q", gpu=5).queued(f"d{i}", queue="q", gpu=1)
    snap.queued("new", queue="q", gpu=4)
    problem = compile_snapshot(snap.build())
    by_id = {a.id: a for a in problem.actions}
    # Each placed action's node: a pair's two 3s on its first node, the 5 and the 1 on its second.
    where: dict[str, int] = {}
    for i in range(pairs):
        where |= {f"a{i}": 2 * i, f"b{i}": 2 * i, f"c{i}": 2 * i + 1, f"d{i}": 2 * i + 1}
    units = [
        Unit(("action", a.index), a.queue, a.items, NodeAssignment(0, ((0, where[a.id]),)))
        for a in problem.actions
        if a.id in where
    ]
    units.append(Unit(("action", by_id["new"].index), by_id["new"].queue, by_id["new"].items))
    free = [pool.room - pool.used for pool in problem.pools]
    opened = [np.arange(pool.max_nodes) < pool.nodes for pool in problem.pools]
    model = PlacementModel(problem, units, free, opened, {})

    verdict, placements, spent = model.solve(0.1, 0, proving=False)

    assert verdict is Feasibility.FEASIBLE
    assert spent <= 0.1 + 0.01  # the limit, and no more than one check of it
    gpus = np.zeros(2 * pairs, dtype=np.int64)
    for unit, placement in zip(units, placements, strict=True):
        ((_, node),) = placement.spots
        gpus[node] += sum(item.gpus for item in unit.items)
    assert gpus.max() <= 8
