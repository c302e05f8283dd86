"""A list of containers is compiled once for the whole line (D380): what depends on the queue
(its routing, its caps) stays the queue's own, and an unrepresentable list fails every action
that asks for it, whether its actions hold one list object (D432) or equal copies."""

import pytest

from models.errors import ErrorCode
from models.snapshot import Action, Container, Snapshot, share_equal_containers
from solver import TickOptions, tick
from tests.support.builders import SnapshotBuilder, ctr

OPTIONS = TickOptions(time_limit_s=5.0)


def _lists_shared(snapshot: Snapshot, shared: bool) -> Snapshot:
    """The snapshot, its actions of equal lists holding one list object (or each its own)."""
    actions = [a.model_copy(update={"containers": list(a.containers)}) for a in snapshot.actions]
    if shared:
        share_equal_containers(actions)
    return snapshot.model_copy(update={"actions": actions})


@pytest.mark.parametrize("shared", [True, False])
def test_queues_asking_for_the_same_containers_keep_their_own_routing_and_caps(
    shared: bool,
) -> None:
    workers = [ctr("driver", cpu="2"), ctr("worker", cpu="8", memory="32Gi", gpu=2)]
    snapshot = (
        SnapshotBuilder()
        .queue("east-team", clusters=["east"])
        .queue("west-team", clusters=["west"])
        .queue("capped", max_accelerators={"H100": 1})
        .cluster("east")
        .pool("cpu", cpu="16", memory="64Gi", nodes=2)
        .pool("h100", cpu="96", memory="1Ti", accelerator="H100", accelerators=8, nodes=1)
        .cluster("west")
        .pool("cpu", cpu="16", memory="64Gi", nodes=2)
        .pool("a100", cpu="96", memory="1Ti", accelerator="A100", accelerators=8, nodes=1)
        .queued("east-1", queue="east-team", containers=workers)
        .queued("west-1", queue="west-team", containers=workers)
        .queued("capped-1", queue="capped", containers=workers)
        .queued("east-2", queue="east-team", containers=workers)
        .build()
    )
    result = tick(_lists_shared(snapshot, shared), OPTIONS)
    placed = {s.action: (s.cluster, [c.node_pool for c in s.containers]) for s in result.scheduled}
    assert placed["east-1"] == ("east", ["cpu", "h100"])
    assert placed["east-2"] == ("east", ["cpu", "h100"])
    assert placed["west-1"] == ("west", ["cpu", "a100"])
    # Its H100 cap is below the worker's two GPUs: only the A100 pool can take them.
    assert placed["capped-1"] == ("west", ["cpu", "a100"])
    assert result.failed == [] and result.waiting == []


@pytest.mark.parametrize("shared", [True, False])
def test_an_unrepresentable_list_fails_each_action_of_it_in_every_queue(shared: bool) -> None:
    snapshot = (
        SnapshotBuilder()
        .queue("a")
        .queue("b")
        .cluster("east")
        .pool("cpu", cpu="16", memory="64Gi", nodes=1)
        .queued("a-huge", queue="a", cpu="1")
        .queued("b-huge", queue="b", cpu="1")
        .queued("a-small", queue="a", cpu="1")
        .queued("b-huge-again", queue="b", cpu="1")
        .build()
    )
    huge = Container.model_construct(
        name="main", resources={"cpu": 1000, "memory": 2**80}, gpu=None, node_selector={}
    )
    actions: list[Action] = [
        a.model_copy(update={"containers": [huge]}) if "huge" in a.id else a
        for a in snapshot.actions
    ]
    result = tick(_lists_shared(snapshot.model_copy(update={"actions": actions}), shared), OPTIONS)
    assert [s.action for s in result.scheduled] == ["a-small"]
    failed = {f.action: f for f in result.failed}
    assert set(failed) == {"a-huge", "b-huge", "b-huge-again"}
    for action, failure in failed.items():
        assert failure.code is ErrorCode.INFEASIBLE
        assert failure.message.startswith(f"action {action} cannot be compiled")
        assert "containers.0.resources.memory" in failure.message
    assert result.solver.rejected_actions == 3 and result.waiting == []
