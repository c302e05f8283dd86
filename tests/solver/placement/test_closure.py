"""Room a local check cannot see, found by repacking the action's neighbourhood wherever its
units may go (solver.placement.closure): real admissions, the oracle's answer."""

from __future__ import annotations

import pytest

import solver.placement.closure
import solver.placement.decide
from solver import TickOptions, tick
from tests.support.builders import SnapshotBuilder
from tests.support.oracle import decide

H100 = {"cpu": "96", "memory": "1Ti", "accelerator": "H100", "accelerators": 8}


def test_four_admissions_moved_to_another_pool_make_room_without_a_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # docs/engine/exactness.md: above 60 placed units a check lets only the units on the
    # action's pools move, within those pools. Best-fit packs a-d (2 GPUs each) onto pool x's
    # node; e (8) may use only pool x. No repair moves four units, and a local model cannot
    # move them to pool y; the repacking of x's units does, and the oracle admits all five.
    monkeypatch.setattr(solver.placement.decide, "EXACT_NEIGHBOURHOOD_UNITS", 0)
    builder = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, labels={"only": "x"})
        .pool("y", **H100)
    )
    for action_id in "abcd":
        builder = builder.queued(action_id, queue="q", gpu="H100:2")
    snapshot = builder.queued("e", queue="q", gpu="H100:8", selector={"only": "x"}).build()
    result = tick(snapshot, TickOptions())
    assert [s.action for s in result.scheduled] == decide(snapshot).admitted
    assert [s.action for s in result.scheduled] == ["a", "b", "c", "d", "e"]
    placed = {s.action: s.containers[0].node_pool for s in result.scheduled}
    assert placed == {"a": "y", "b": "y", "c": "y", "d": "y", "e": "x"}
    assert result.solver.model_solves == 0
    assert result.solver.unproven_refusals == 0


def test_no_repacking_when_the_time_limit_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    # The repacking is charged to the time limit like a model check: past it, best-fit decides.
    monkeypatch.setattr(solver.placement.decide, "EXACT_NEIGHBOURHOOD_UNITS", 0)
    builder = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, labels={"only": "x"})
        .pool("y", **H100)
    )
    for action_id in "abcd":
        builder = builder.queued(action_id, queue="q", gpu="H100:2")
    snapshot = builder.queued("e", queue="q", gpu="H100:8", selector={"only": "x"}).build()
    result = tick(snapshot, TickOptions(time_limit_s=1e-9))
    assert [s.action for s in result.scheduled] == ["a", "b", "c", "d"]
    assert result.solver.limit_hit


def test_the_neighbourhood_model_finds_what_the_packing_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # When the packing finds nothing, a model of the same neighbourhood (each unit anywhere it
    # may go) is asked after the local ones; its placement is as real.
    monkeypatch.setattr(solver.placement.decide, "EXACT_NEIGHBOURHOOD_UNITS", 0)
    monkeypatch.setattr(solver.placement.closure, "repack", lambda *_: (None, 0.0))
    builder = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, labels={"only": "x"})
        .pool("y", **H100)
    )
    for action_id in "abcd":
        builder = builder.queued(action_id, queue="q", gpu="H100:2")
    snapshot = builder.queued("e", queue="q", gpu="H100:8", selector={"only": "x"}).build()
    result = tick(snapshot, TickOptions())
    assert [s.action for s in result.scheduled] == ["a", "b", "c", "d", "e"]
    # Pool x alone has no free room for e, so no local model is built: the one model is the
    # neighbourhood's.
    assert result.solver.model_solves == 1
    assert result.solver.unproven_refusals == 0


def test_a_large_neighbourhood_is_cut_to_the_units_of_the_nearest_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pool x's two nodes hold a-d (2 GPUs each) and f, g (4 each, only x); e (8) may use only x.
    # With room for four units in a neighbourhood, those of the first node as short of room as
    # any are packed again: a-d go to pool y and e takes their node, without a model.
    monkeypatch.setattr(solver.placement.decide, "EXACT_NEIGHBOURHOOD_UNITS", 0)
    monkeypatch.setattr(solver.placement.closure, "MAX_UNITS", 4)
    builder = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, nodes=2, labels={"only": "x"})
        .pool("y", **H100)
    )
    for action_id in "abcd":
        builder = builder.queued(action_id, queue="q", gpu="H100:2")
    for action_id in "fg":
        builder = builder.queued(action_id, queue="q", gpu="H100:4", selector={"only": "x"})
    snapshot = builder.queued("e", queue="q", gpu="H100:8", selector={"only": "x"}).build()
    result = tick(snapshot, TickOptions())
    assert [s.action for s in result.scheduled] == decide(snapshot).admitted
    placed = {s.action: (s.containers[0].node_pool, s.containers[0].node) for s in result.scheduled}
    assert placed["e"] == ("x", 0)
    assert {placed[a] for a in "abcd"} == {("y", 0)}
    assert result.solver.model_solves == 0
