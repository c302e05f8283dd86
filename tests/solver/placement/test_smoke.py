"""The tick's exact repacking, what it returns when its time limit cuts it short, and what it
leaves behind."""

import gc
import weakref

from models.result import SolverStatus, WaitReason
from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot
from solver import TickOptions, tick
from solver.tick import tick_with_state


def _running(action_id: str, node: int, gpus: int) -> dict:
    return {
        "id": action_id,
        "queue": "q",
        "submitted_at": "2026-11-30T09:00:00Z",
        "state": "running",
        "placement": {
            "cluster": "east",
            "containers": [{"name": "main", "node_pool": "h100", "node": node}],
        },
        "containers": [{"resources": {"cpu": "1", "gpu": f"H100:{gpus}"}}],
    }


def _queued(action_id: str, minute: int, gpus: int) -> dict:
    return {
        "id": action_id,
        "queue": "q",
        "submitted_at": f"2026-11-30T09:{minute:02d}:00Z",
        "containers": [{"resources": {"cpu": "1", "gpu": f"H100:{gpus}"}}],
    }


def test_exactness_repacks_earlier_admissions_to_fit_a_later_action() -> None:
    # "Exactness: an action of a greedy queue is left waiting only if no placement of it
    # together with all earlier admitted actions exists." Free GPUs are 7 and 5; best-fit puts
    # a (3) on the 5-node and b (4) on the 7-node, leaving no node for c (5). Moving a and b
    # onto the 7-node lets c have the 5-node, so all three run and d (1) finds no GPU left.
    # node 0 has 1 GPU running (7 free), node 1 has 3 (5 free)
    snapshot = _two_nodes(used=(1, 3))
    result = tick(snapshot)
    assert [s.action for s in result.scheduled] == ["a", "b", "c"]
    nodes = {s.action: s.containers[0].node for s in result.scheduled}
    assert nodes["a"] == nodes["b"] != nodes["c"]
    assert [(w.action, w.reason.value) for w in result.waiting] == [("d", "cluster_room")]
    assert result.solver.status.value == "optimal"


def test_a_tick_cut_short_keeps_first_fit_when_it_admits_more_gpus() -> None:
    # Issue 2: "never return a worse answer than a simple first-fit pass would; say in the
    # result when the limit was hit." Same fleet, no time for the model: best-fit leaves c
    # out (8 GPUs admitted), while first-fit, filling node 0 with a and b, leaves c the
    # 5-GPU node (12 GPUs). The tick returns first-fit's answer and says the limit was hit.
    result = tick(_two_nodes(used=(1, 3)), TickOptions(time_limit_s=1e-9))
    assert [s.action for s in result.scheduled] == ["a", "b", "c"]
    assert result.solver.limit_hit
    assert result.solver.status is SolverStatus.LIMIT_REACHED


def test_an_action_left_out_by_the_time_limit_says_so() -> None:
    # Issue 2: "say in the result when the limit was hit". Free GPUs are 5 (node 0) and 7:
    # best-fit and first-fit both put a on node 0 and b on node 1, so c (5) finds no node,
    # though a and b together fit node 1. Without time for the model, c waits with
    # solver_limit, not cluster_room: its room was never disproven.
    result = tick(_two_nodes(used=(3, 1)), TickOptions(time_limit_s=1e-9))
    assert [s.action for s in result.scheduled] == ["a", "b", "d"]
    assert [(w.action, w.reason) for w in result.waiting] == [("c", WaitReason.SOLVER_LIMIT)]
    # With time, the model moves a next to b and c runs.
    assert [s.action for s in tick(_two_nodes(used=(3, 1))).scheduled] == ["a", "b", "c"]


def test_the_ticks_state_has_its_admissions_where_they_sat_at_each_turn() -> None:
    # Issue 18: "A suggestion is proven by re-running the whole tick on the changed snapshot
    # (the deterministic engine, same options)." The tick came to c with a on the 5-GPU node
    # and b on the 7-GPU one; c's check then moved a next to b. A proof resumed at c starts
    # from the first picture, so it needs (and pays for) that check as the tick did, rather
    # than finding c's node already cleared by the move.
    _, state = tick_with_state(_two_nodes(used=(1, 3)))
    position = state.problem.positions()
    nodes_at_c = state.ledger_at(position["c"]).admitted
    at_c = {a: nodes_at_c[position[a]] for a in "ab"}
    left = {a: state.plan.admitted[position[a]] for a in "ab"}
    assert at_c["a"] != at_c["b"] and left["a"] == left["b"]
    assert state.ledger_at(position["d"]).admitted[position["a"]] == left["a"]


def test_a_tick_leaves_its_working_state_to_reference_counting() -> None:
    # Issue 12: a tick makes hundreds of thousands of objects; held in a reference cycle, they
    # outlive it until a collection walks them all. Freed as the last reference goes, none
    # is left for the collector: once the tick's state is let go, its compiled problem is gone
    # with no collection run. (The tick contests c, so the whole walk runs: repair, model.)
    collecting = gc.isenabled()
    gc.disable()
    try:
        _, state = tick_with_state(_two_nodes(used=(1, 3)))
        problem = weakref.ref(state.problem)
        del state
        assert problem() is None
    finally:
        if collecting:
            gc.enable()


def _two_nodes(used: tuple[int, int]) -> Snapshot:
    """Two 8-GPU H100 nodes with `used` GPUs running on each; a (3), b (4), c (5), d (1) wait."""
    node = {"cpu": "96", "memory": "1Ti", "accelerator": "H100", "accelerators": 8}
    return snapshot_from_dict(
        {
            "now": "2026-11-30T10:00:00Z",
            "queues": [{"name": "q", "scheduling": "greedy_capacity"}],
            "clusters": [
                {"name": "east", "node_pools": [{"name": "h100", "node": node, "nodes": 2}]}
            ],
            "actions": [
                _running("r1", 0, used[0]),
                _running("r2", 1, used[1]),
                _queued("a", 1, 3),
                _queued("b", 2, 4),
                _queued("c", 3, 5),
                _queued("d", 4, 1),
            ],
        }
    )
