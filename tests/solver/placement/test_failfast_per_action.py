"""Fail-fast judges an action's containers together, not one at a time.

Issue 12: "an action whose untyped GPU requests, summed over its containers, exceed the cap
of every device type they could land on in the queue's clusters waits forever (`queue_cap` or
`lower_priority`) instead of failing `INFEASIBLE`" and "Check every other fail-fast rule for
the same per-container-versus-per-action gap." Each test below failed before the change
(the action waited); each failure must also be explained, with a suggestion that works.
"""

from __future__ import annotations

from models.errors import ErrorCode
from models.result import TickResult
from models.snapshot import Snapshot
from solver import TickOptions, tick
from tests.support.builders import SnapshotBuilder, ctr
from tests.support.explain import prove
from tests.support.oracle import decide

OPTIONS = TickOptions(time_limit_s=5.0)


def _failed(result: TickResult) -> dict[str, tuple[ErrorCode, str]]:
    return {f.action: (f.code, f.message) for f in result.failed}


def _t4_queue(cap: int) -> SnapshotBuilder:
    return (
        SnapshotBuilder()
        .queue("team", max_accelerators={"T4": cap})
        .cluster("east")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=4, nodes=2)
    )


def _fails_infeasible(snap: Snapshot, action: str, words: str) -> None:
    result = tick(snap, OPTIONS)
    code, message = _failed(result)[action]
    assert code is ErrorCode.INFEASIBLE
    assert words in message, message
    # The oracle's enumerated checks call it infeasible too, so no reading lets it wait.
    verdict = decide(snap)
    assert verdict.failed[action] is ErrorCode.INFEASIBLE
    assert action not in verdict.ambiguous
    assert prove(snap, result, action) == []


def test_untyped_gpus_split_over_containers_above_every_type_cap_fail_infeasible() -> None:
    # Issue 12: "a queue capped at `T4=2` in a cluster whose only GPUs are T4, and an action of
    # two containers with `gpu: 2` and `gpu: 1`; a single container with `gpu: 3` is caught
    # today, the split one is not."
    snap = (
        _t4_queue(2)
        .queued("single", queue="team", gpu=3)
        .queued("split", queue="team", containers=[ctr("a", gpu=2), ctr("b", gpu=1)])
        .build()
    )
    result = tick(snap, OPTIONS)
    assert _failed(result)["single"][0] is ErrorCode.INFEASIBLE
    _fails_infeasible(snap, "split", "untyped GPUs 2+1 of containers a, b")


def test_split_untyped_gpus_that_two_capped_types_can_share_still_run() -> None:
    # The sum is not compared with one cap: gpu=2 fits under T4=2 and gpu=1 under A10G=1.
    snap = (
        SnapshotBuilder()
        .queue("team", max_accelerators={"T4": 2, "A10G": 1})
        .cluster("east")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=4, nodes=1)
        .pool("a10g", cpu="32", memory="128Gi", accelerator="A10G", accelerators=4, nodes=1)
        .queued("split", queue="team", containers=[ctr("a", gpu=2), ctr("b", gpu=1)])
        .build()
    )
    result = tick(snap, OPTIONS)
    assert [s.action for s in result.scheduled] == ["split"]


def test_typed_and_untyped_containers_above_the_type_cap_fail_infeasible() -> None:
    # "If it chooses a device that has its own cap, the request counts against that cap as
    # well": L4:1 and gpu=1 on an L4-only cluster charge 2 L4 against a cap of 1, always.
    snap = (
        SnapshotBuilder()
        .queue("team", max_accelerators={"L4": 1})
        .cluster("east")
        .pool("l4", cpu="32", memory="128Gi", accelerator="L4", accelerators=4, nodes=2)
        .queued("mixed", queue="team", containers=[ctr("typed", gpu="L4:1"), ctr("any", gpu=1)])
        .build()
    )
    _fails_infeasible(snap, "mixed", "caps every GPU type here below what they need together")


def test_environment_replicas_above_every_type_cap_fail_infeasible() -> None:
    # The same rule for a pool's replicas: three replicas of gpu=1 under T4=2.
    snap = (
        _t4_queue(2)
        .environment("serve", queue="team", replicas=3, gpu=1)
        .queued("join", queue="team", environment="serve")
        .build()
    )
    _fails_infeasible(snap, "join", "untyped GPUs 1+1+1")


def test_containers_confined_to_a_small_pool_fail_infeasible() -> None:
    # The cluster total hides it: two CPU containers of 6 cores can only use the one CPU node
    # of 8 cores (GPU nodes take GPU work only); the GPU node's 64 cores do not help them.
    snap = (
        SnapshotBuilder()
        .queue("team")
        .cluster("east")
        .pool("cpu", cpu="8", memory="64Gi", nodes=1)
        .pool("gpu", cpu="64", memory="256Gi", accelerator="A100", accelerators=8, nodes=1)
        .queued(
            "mixed",
            queue="team",
            containers=[ctr("p", cpu="6"), ctr("q", cpu="6"), ctr("g", cpu="1", gpu="A100:1")],
        )
        .build()
    )
    _fails_infeasible(snap, "mixed", "containers p, q, which only pools cpu can take")


def test_typed_containers_above_their_type_at_full_scale_fail_infeasible() -> None:
    # Two T4:2 containers and one A100:1: 5 GPUs fit the cluster's 10, but the T4 pool has 2.
    snap = (
        SnapshotBuilder()
        .queue("team")
        .cluster("east")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=2, nodes=1)
        .pool("a100", cpu="32", memory="128Gi", accelerator="A100", accelerators=8, nodes=1)
        .queued(
            "mixed",
            queue="team",
            containers=[ctr("x", gpu="T4:2"), ctr("y", gpu="T4:2"), ctr("z", gpu="A100:1")],
        )
        .build()
    )
    _fails_infeasible(snap, "mixed", "containers x, y, which only pools t4 can take")
