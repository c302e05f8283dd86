"""Room best-fit cannot find, found by moving decided admissions out of the way
(solver.placement.repair): real admissions without a model, the oracle's answer."""

from __future__ import annotations

from models.result import TickResult
from models.snapshot import Snapshot
from solver import TickOptions, tick
from tests.support.builders import SnapshotBuilder
from tests.support.oracle import decide

H100 = {"cpu": "96", "memory": "1Ti", "accelerator": "H100", "accelerators": 8}


def _line(waiting: list[tuple[str, int, dict[str, str] | None]]) -> Snapshot:
    """Two one-node H100 pools, `x` (labelled, listed first) and `y`, and the line in order."""
    builder = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, labels={"only": "x"})
        .pool("y", **H100)
    )
    for action_id, gpus, selector in waiting:
        builder = builder.queued(action_id, queue="q", gpu=f"H100:{gpus}", selector=selector)
    return builder.build()


def _repaired(snapshot: Snapshot, result: TickResult) -> tuple[list[str], dict[str, str]]:
    """The tick's admissions, checked against the oracle's and made with no model, and the
    pool each admission landed in."""
    admitted = [s.action for s in result.scheduled]
    assert admitted == decide(snapshot).admitted
    assert result.solver.model_solves == 0
    return admitted, {s.action: s.containers[0].node_pool for s in result.scheduled}


def test_one_admission_moved_elsewhere_makes_room_without_a_model() -> None:
    # Best-fit puts a (6) on the first pool's node; b (4) can only use that pool, and finds
    # 2 GPUs there. Moving a to pool y gives b its room: the oracle admits both.
    snapshot = _line([("a", 6, None), ("b", 4, {"only": "x"})])
    result = tick(snapshot, TickOptions())
    assert _repaired(snapshot, result) == (["a", "b"], {"a": "y", "b": "x"})
    assert result.solver.status.value == "optimal"


def test_two_admissions_moved_off_one_node_make_room_without_a_model() -> None:
    # a (4) and b (4) fill pool x's node; c (8) may only use pool x, and neither move alone
    # makes room for it: moving both to pool y does.
    snapshot = _line([("a", 4, None), ("b", 4, None), ("c", 8, {"only": "x"})])
    assert _repaired(snapshot, tick(snapshot, TickOptions())) == (
        ["a", "b", "c"],
        {"a": "y", "b": "y", "c": "x"},
    )


def test_no_repair_when_the_time_limit_is_spent() -> None:
    # A repair starts only while the time limit has some left: past it, best-fit decides.
    snapshot = _line([("a", 6, None), ("b", 4, {"only": "x"})])
    result = tick(snapshot, TickOptions(time_limit_s=1e-9))
    assert [s.action for s in result.scheduled] == ["a"]
    assert result.solver.limit_hit


def test_a_repair_sees_the_units_a_node_holds_now() -> None:
    # b's repair looks at pool x's node (a on it) and moves a to pool y; e then lands on x.
    # f's repair looks at x again: it holds b and e now, and moving e to pool z makes room.
    snapshot = (
        SnapshotBuilder()
        .queue("q", scheduling="greedy_capacity")
        .cluster("east")
        .pool("x", **H100, labels={"only": "x"})
        .pool("y", **H100)
        .pool("z", **H100)
        .queued("a", queue="q", gpu="H100:6")
        .queued("b", queue="q", gpu="H100:4", selector={"only": "x"})
        .queued("e", queue="q", gpu="H100:3")
        .queued("f", queue="q", gpu="H100:4", selector={"only": "x"})
        .build()
    )
    placed = {"a": "y", "b": "x", "e": "z", "f": "x"}
    assert _repaired(snapshot, tick(snapshot, TickOptions())) == (["a", "b", "e", "f"], placed)


def test_two_admissions_trading_places_make_room_without_a_model() -> None:
    # "When an action does not fit, the queue moves on to the next one and schedules every
    # action that fits." c fits once two decided admissions trade nodes (D445):
    # a (5) sits on pool x's node, b (4) on pool y's; c (4) may only use pool x. Moving a
    # alone leaves it no node (3 and 4 free), but a and b trading places makes room for c:
    # a chain of two moves, the second in the way of the first.
    snapshot = _line([("a", 5, None), ("b", 4, None), ("c", 4, {"only": "x"})])
    assert _repaired(snapshot, tick(snapshot, TickOptions())) == (
        ["a", "b", "c"],
        {"a": "y", "b": "x", "c": "x"},
    )
