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


def _two_models(typed_t4: int) -> Snapshot:
    """One cluster listing a small T4 pool before a large H100 one; an untyped pod queued first,
    and `typed_t4` pods asking for a T4 each behind it."""
    typed = [
        {
            "id": f"t4-{i}",
            "submitted_at": "2026-11-30T09:01:00Z",
            "containers": [{"resources": {"cpu": "1", "memory": "1Gi", "gpu": "T4:1"}}],
        }
        for i in range(typed_t4)
    ]
    return snapshot_from_dict(
        {
            "now": "2026-11-30T10:00:00Z",
            "queues": [{"name": "q", "pool": "p"}],
            "clusters": [
                {
                    "name": "c",
                    "node_pools": [_one_gpu_pool("t4", "T4", 2), _one_gpu_pool("h100", "H100", 3)],
                }
            ],
            "actions": [
                {
                    "id": "untyped",
                    "submitted_at": "2026-11-30T09:00:00Z",
                    "containers": [{"resources": {"cpu": "1", "memory": "1Gi", "gpu": 1}}],
                },
                *typed,
            ],
        }
    )


def _one_gpu_pool(name: str, model: str, nodes: int) -> dict[str, object]:
    node = {"cpu": "8", "memory": "32Gi", "accelerator": model, "accelerators": 1}
    return {"name": name, "node": node, "nodes": nodes}


@pytest.mark.parametrize("typed_t4", [0, 2])
def test_untyped_gpus_land_on_the_model_with_most_spare_gpus(typed_t4: int) -> None:
    # Seed: a task "asks for a GPU of any type with gpu=1", so the model is a free choice of
    # the tick (D220): it goes where typed work in the line needs GPUs least, here
    # the three free H100 against two T4 (fewer still once the line's T4 pods are counted),
    # though the cluster lists the T4 pool first. First-fit keeps the pool order.
    snapshot = _two_models(typed_t4)
    placed = {s.action: s.containers[0].node_pool for s in tick(snapshot).scheduled}
    assert placed["untyped"] == "h100"
    assert len(placed) == 1 + typed_t4
    plain = tick(snapshot, TickOptions(first_fit=True)).scheduled
    assert {s.action: s.containers[0].node_pool for s in plain}["untyped"] == "t4"
