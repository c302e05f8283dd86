"""The tick's exact repacking, on a case a best-fit pass gets wrong."""

from models.scenario import snapshot_from_dict
from solver import tick


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
    snapshot = snapshot_from_dict(
        {
            "now": "2026-11-30T10:00:00Z",
            "queues": [{"name": "q", "scheduling": "greedy_capacity"}],
            "clusters": [
                {
                    "name": "east",
                    "node_pools": [
                        {
                            "name": "h100",
                            "node": {
                                "cpu": "96",
                                "memory": "1Ti",
                                "accelerator": "H100",
                                "accelerators": 8,
                            },
                            "nodes": 2,
                        }
                    ],
                }
            ],
            "actions": [
                _running("r1", 0, 1),
                _running("r2", 1, 3),
                _queued("a", 1, 3),
                _queued("b", 2, 4),
                _queued("c", 3, 5),
                _queued("d", 4, 1),
            ],
        }
    )
    result = tick(snapshot)
    assert [s.action for s in result.scheduled] == ["a", "b", "c"]
    nodes = {s.action: s.containers[0].node for s in result.scheduled}
    assert nodes["a"] == nodes["b"] != nodes["c"]
    assert [(w.action, w.reason.value) for w in result.waiting] == [("d", "cluster_room")]
    assert result.solver.status.value == "optimal"
