"""Input the engine cannot represent fails one action or leaves out one pool, never the tick.

Issue 11: "Defence in depth: a tick never fails because of one action, queue or pool. If
something still cannot be compiled, that action fails `INFEASIBLE` (that pool is skipped,
with a logged error and a metric), and the rest of the line is scheduled." Issue 12: "if it
slipped in, that one action fails `INFEASIBLE` with a message and the rest of the line is
scheduled." The values below skip validation (model_construct, as an old stored row or a
caller's own model would); before the change each one but the caps stopped the whole tick
with an OverflowError or a MemoryError.
"""

from __future__ import annotations

import logging

import pytest

from models.errors import ErrorCode
from models.snapshot import Container, NodePool, Snapshot
from solver import TickOptions, tick
from solver.explain.action import explain
from tests.support.builders import SnapshotBuilder, ctr

OPTIONS = TickOptions(time_limit_s=5.0)


def _line() -> Snapshot:
    return (
        SnapshotBuilder()
        .queue("team", max_resources={"memory": "1Ti"})
        .environment("serve", queue="team", replicas=2, cpu="1", memory="1Gi")
        .cluster("east")
        .pool("cpu", cpu="64", memory="256Gi", nodes=2)
        .pool("spare", cpu="64", memory="256Gi", nodes=1)
        .queued("first", queue="team", cpu="2")
        .queued("huge", queue="team", cpu="2")
        .queued("join", queue="team", environment="serve")
        .queued("last", queue="team", containers=[ctr("a", cpu="2"), ctr("b", cpu="2")])
        .build()
    )


def _with_pool(snapshot: Snapshot, pool: NodePool) -> Snapshot:
    """The snapshot with the node pool of the same name replaced by `pool`."""
    cluster = snapshot.clusters[0]
    pools = [pool if p.name == pool.name else p for p in cluster.node_pools]
    clusters = [cluster.model_copy(update={"node_pools": pools})]
    return snapshot.model_copy(update={"clusters": clusters})


def _huge_pool(spare: NodePool, what: str) -> NodePool:
    if what == "nodes 2**40":
        return NodePool.model_construct(
            name=spare.name, node=spare.node, labels={}, nodes=2**40, max_nodes=None
        )
    return spare.model_copy(update={"node": spare.node.model_copy(update={"cpu": 2**80})})


def _with_request(snapshot: Snapshot, action_id: str, memory: int) -> Snapshot:
    huge = Container.model_construct(
        name="main", resources={"cpu": 2000, "memory": memory}, gpu=None, node_selector={}
    )
    actions = [
        a.model_copy(update={"containers": [huge]}) if a.id == action_id else a
        for a in snapshot.actions
    ]
    return snapshot.model_copy(update={"actions": actions})


@pytest.mark.parametrize("pool", ["nodes 2**40", "cpu 2**80"])
def test_an_unrepresentable_action_fails_and_a_pool_is_skipped_the_rest_is_scheduled(
    pool: str, caplog: pytest.LogCaptureFixture
) -> None:
    snapshot = _with_request(_line(), "huge", 2**80)
    snapshot = _with_pool(snapshot, _huge_pool(snapshot.clusters[0].node_pools[1], pool))
    with caplog.at_level(logging.ERROR, logger="sluice.engine"):
        result = tick(snapshot, OPTIONS)
    assert {s.action for s in result.scheduled} == {"first", "join", "last"}
    assert {p.node_pool for s in result.scheduled for p in s.containers} == {"cpu"}
    [failure] = result.failed
    assert (failure.action, failure.code) == ("huge", ErrorCode.INFEASIBLE)
    assert "containers.0.resources.memory" in failure.message
    assert (result.solver.rejected_actions, result.solver.skipped_pools) == (1, 1)
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("action huge" in line for line in logged)
    assert any("node pool east/spare" in line for line in logged)
    # Its explanation says the same, without suggesting changes that cannot help.
    explanation = explain(snapshot, "huge", result)
    assert explanation.code == "INFEASIBLE"
    assert "containers.0.resources.memory" in explanation.message


def test_an_unrepresentable_environment_fails_the_actions_that_start_it() -> None:
    snapshot = _line()
    env = snapshot.environments[0]
    broken = env.model_copy(update={"resources": {"cpu": 1000, "memory": 2**80}})
    snapshot = snapshot.model_copy(update={"environments": [broken]})
    result = tick(snapshot, OPTIONS)
    assert {s.action for s in result.scheduled} == {"first", "huge", "last"}
    [failure] = result.failed
    assert failure.action == "join" and failure.code is ErrorCode.INFEASIBLE
    assert "environment serve" in failure.message and "resources.memory" in failure.message
    assert result.solver.rejected_actions == 1


def test_caps_and_limits_beyond_the_engine_cap_nothing() -> None:
    # A queue's cap or limit past int64 (never representable in the engine's arrays) caps
    # nothing the engine can hold: the line is scheduled as without it.
    snapshot = _line()
    queue = snapshot.queues[0].model_copy(
        update={"max_resources": {"memory": 2**80}, "depth": 2**70, "action_concurrency": 2**70}
    )
    result = tick(snapshot.model_copy(update={"queues": [queue]}), OPTIONS)
    assert {s.action for s in result.scheduled} == {"first", "huge", "join", "last"}


def test_a_running_action_beyond_the_engine_does_not_stop_the_tick() -> None:
    snapshot = (
        SnapshotBuilder()
        .queue("team")
        .cluster("east")
        .pool("cpu", cpu="64", memory="256Gi", nodes=2)
        .running("old", queue="team", cpu="2", on=("east", "cpu", 0))
        .queued("new", queue="team", cpu="2")
        .build()
    )
    snapshot = _with_request(snapshot, "old", 2**80)
    assert [s.action for s in tick(snapshot, OPTIONS).scheduled] == ["new"]


def test_a_queue_whose_running_work_holds_beyond_the_engine_stays_capped() -> None:
    # Each running request is within the engine's range, their sum is beyond int64: the
    # compiled ledger keeps the queue's use saturated (solver/placement/room.pyx), so the
    # tick runs and the cap still refuses.
    builder = SnapshotBuilder().queue("team", max_resources={"memory": "1Ti"}).cluster("east")
    builder.pool("cpu", cpu="64", memory="256Gi", nodes=5)
    for node in range(5):
        builder.running(f"held-{node}", queue="team", cpu="1", on=("east", "cpu", node))
    snapshot = builder.queued("new", queue="team", cpu="1", memory="1Gi").build()
    for node in range(5):
        snapshot = _with_request(snapshot, f"held-{node}", 2**61 - 1)
    result = tick(snapshot, OPTIONS)
    assert [s.action for s in result.scheduled] == []
    [waiting] = result.waiting
    assert (waiting.action, waiting.reason.value, waiting.resource) == (
        "new",
        "queue_cap",
        "memory",
    )
