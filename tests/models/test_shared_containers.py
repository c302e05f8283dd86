"""Actions of equal lists of containers share one list (share_equal_containers, D433), and
only lists equal as they would be written out."""

from models.snapshot import Snapshot, share_equal_containers
from tests.support.builders import SnapshotBuilder, ctr


def _line() -> Snapshot:
    pair = [ctr("driver", cpu="2"), ctr("worker", cpu="8", memory="32Gi", gpu="H100:2")]
    return (
        SnapshotBuilder()
        .queue("a")
        .queue("b")
        .cluster("east")
        .pool("cpu", cpu="16", memory="64Gi", nodes=2)
        .queued("a-1", queue="a", containers=pair)
        .queued("b-1", queue="b", containers=pair)
        .queued("a-2", queue="a", containers=pair[:1])
        .queued("b-2", queue="b", containers=pair[::-1])
        .queued("a-3", queue="a", cpu="2")
        .build()
    )


def test_equal_lists_become_one_and_the_snapshot_reads_the_same() -> None:
    snapshot = _line()
    before = snapshot.model_dump_json()
    share_equal_containers(snapshot.actions)
    lists = {a.id: a.containers for a in snapshot.actions}
    assert lists["a-1"] is lists["b-1"]
    # A prefix, the same containers in another order, another container: lists of their own.
    assert len({id(containers) for containers in lists.values()}) == 4
    assert snapshot.model_dump_json() == before


def test_containers_whose_maps_are_in_another_order_keep_their_lists() -> None:
    snapshot = _line()
    first, second = snapshot.actions[:2]
    worker = second.containers[1]
    reordered = worker.model_copy(update={"resources": dict(reversed(worker.resources.items()))})
    second.__dict__["containers"] = [second.containers[0], reordered]
    share_equal_containers(snapshot.actions)
    assert first.containers is not second.containers
    assert list(second.containers[1].resources) == list(reversed(worker.resources))
