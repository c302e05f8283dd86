"""Where am I in line (issue 14, part 6): a waiting action's place in its queue's line and in
the global order, and how many ahead of it could take the capacity it needs."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from tests.support.service import Service


def _submit(svc: Service, action_id: str, queue: str, gpu: str | None = None) -> None:
    container: dict[str, Any] = {"resources": {"cpu": "1", "memory": "1Gi"}}
    if gpu:
        container["gpu"] = gpu
    svc.ok("POST", "/actions", {"id": action_id, "queue": queue, "containers": [container]}, 201)


def test_a_waiting_action_shows_its_place_in_line(svc: Service) -> None:
    """Issue 14: "A waiting action shows its position: in its queue's line and in the global
    order, and how many actions ahead of it could take the capacity it needs." """
    for queue in ({"name": "fill"}, {"name": "research", "action_concurrency": 1}, {"name": "o"}):
        svc.ok("POST", "/queues", queue, status=201)
    _submit(svc, "fill-0", "fill", "H100:8")  # the fleet's 16 H100s, taken
    _submit(svc, "fill-1", "fill", "H100:8")
    _submit(svc, "r0", "research")  # runs: research's one slot
    _submit(svc, "r1", "research", "H100:1")
    _submit(svc, "r2", "research")
    _submit(svc, "r3", "research", "H100:1")
    _submit(svc, "o1", "o", "H100:8")  # no H100 left
    svc.tick()
    seen = {
        action_id: svc.ok("GET", f"/actions/{action_id}") for action_id in ("r1", "r2", "r3", "o1")
    }
    places = {
        action_id: (a["queue_position"], a["global_position"], a["ahead_competing"])
        for action_id, a in seen.items()
    }
    assert places == {
        "r1": (1, 1, 0),
        "r2": (2, 2, 1),  # r1 holds its queue's next slot
        "r3": (3, 3, 2),
        "o1": (1, 4, 2),  # r1 and r3 could land on the H100 nodes; r2 only on cpu nodes
    }
    assert seen["o1"]["waiting_reason"] == "cluster_room"
    assert svc.ok("GET", "/actions/r0")["queue_position"] is None  # scheduled: not in line
    result = CliRunner().invoke(main, ["get", "action", "o1"], obj=Remote(connection=svc.client()))
    assert "in line: 1 in queue o, 4 in the global order; 2 ahead could take the capacity" in (
        result.stdout
    )
