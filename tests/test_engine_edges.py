"""Edges of the tick engine that the seed fixtures do not reach."""

from models.result import WaitReason
from models.scenario import snapshot_from_dict
from solver import tick


def test_without_any_cluster_actions_wait_instead_of_failing() -> None:
    # A service whose fleet is not described yet cannot judge placement: nothing is
    # INFEASIBLE for want of clusters, the line waits with a reason.
    snapshot = snapshot_from_dict(
        {
            "now": "2026-11-30T10:00:00Z",
            "actions": [
                {
                    "id": "a",
                    "submitted_at": "2026-11-30T09:00:00Z",
                    "containers": [{"resources": {"cpu": "1"}}],
                }
            ],
        }
    )
    result = tick(snapshot)
    assert result.failed == []
    assert [(w.action, w.reason) for w in result.waiting] == [("a", WaitReason.CLUSTER_ROOM)]
