"""Edges of the tick engine that the seed fixtures do not reach."""

import random

import pytest

from bench.baseline import first_fit
from models.result import ScheduledAction, WaitReason
from models.scenario import snapshot_from_dict
from models.snapshot import Snapshot
from solver import TickOptions, tick
from tests.support.generate import PACKING, SMALL, Size, random_snapshot


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


@pytest.mark.parametrize("size", [PACKING, SMALL], ids=["packing", "small"])
def test_a_tick_cut_short_is_never_worse_than_first_fit(size: Size) -> None:
    # Issue 2: "Give the solver a time limit and a hint, and never return a worse answer
    # than a simple first-fit pass would"; issue 7: "Never fewer GPUs admitted than the
    # first-fit baseline". With almost no time for the model, the engine admits no fewer GPUs
    # than the independent first-fit baseline in bench/baseline.py.
    worse = []
    for seed in range(300):
        snapshot = random_snapshot(random.Random(seed), size)
        engine = tick(snapshot, TickOptions(time_limit_s=1e-6)).scheduled
        baseline = first_fit(snapshot).scheduled
        if _gpus(snapshot, engine) < _gpus(snapshot, baseline):
            worse.append(seed)
    assert worse == []


def _gpus(snapshot: Snapshot, scheduled: list[ScheduledAction]) -> int:
    gpus = {
        a.id: sum(c.gpu.count for c in a.containers if c.gpu is not None) for a in snapshot.actions
    }
    return sum(gpus[s.action] for s in scheduled)
