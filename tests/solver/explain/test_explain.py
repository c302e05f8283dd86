"""Explanations on the seed fixtures and fixtures/explain/: every reason kind, exact sentences,
and every explanation proven by re-solving.

Issue 5: "Every reason kind above is produced, proved by the tests" and "Each item reads
as a sentence with numbers". The sentences are part of the contract, so the table below
asserts them letter for letter (as Kueue's tests assert its "why pending" messages).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache

import pytest

from fixtures import FIXTURES
from models.errors import NotFound
from models.explanation import Explanation, ExplanationState, ReasonKind
from models.result import TickResult, WaitingAction, WaitReason
from models.scenario import load_scenario
from models.snapshot import ActionState, Snapshot
from solver import tick
from solver.explain.action import explain
from solver.explain.changes import apply_changes
from tests.support.builders import SnapshotBuilder
from tests.support.explain import OPTIONS, prove, scheduled
from tests.support.generate import DOZEN, random_snapshot


@cache
def world(name: str) -> tuple[Snapshot, TickResult]:
    snapshot = load_scenario(FIXTURES / f"{name}.yaml")
    return snapshot, tick(snapshot, OPTIONS)


def explained(name: str, action: str) -> Explanation:
    snapshot, result = world(name)
    return explain(snapshot, action, result)


@dataclass(frozen=True)
class Case:
    fixture: str
    action: str
    state: ExplanationState
    code: str
    items: list[tuple[ReasonKind, str]]
    suggestions: list[str] = field(default_factory=list)


WAITING, FAILED = ExplanationState.WAITING, ExplanationState.FAILED
K = ReasonKind

CASES: dict[str, Case] = {
    "named resource cap, used up": Case(
        "seeds/caps-count-requests", "one-more-cpu", WAITING, "queue_cap",
        [(K.QUEUE_CAP, "queue team, cpu: 8 of 8 in use, needs 1")],
        ["raise max_resources cpu of queue team to 9: then it runs",
         "or wait until queue team's running work frees 1 cpu (huge-memory finishing): then it"
         " runs"],
    ),
    # Issue 5's own example sentence.
    "device cap, used up": Case(
        "seeds/seed-cli-queues", "sweep-7", WAITING, "queue_cap",
        [(K.DEVICE_CAP, "queue research, nvidia_gpu/nvidia-h100: 48 of 48 in use, needs 8")],
        ["raise max_accelerators nvidia_gpu/nvidia-h100 of queue research to 56: then it runs",
         "or wait until queue research's running work frees 8 nvidia_gpu/nvidia-h100 (sweep-1"
         " finishing): then it runs"],
    ),
    # The seed's 8-GPU example: "train starts once 4 GPUs are free at the same moment".
    "untyped GPU cap, 2 of the 4 free": Case(
        "seeds/eight-gpu-strict", "train", WAITING, "queue_cap",
        [(K.UNTYPED_GPU_CAP, "queue team, untyped GPUs: 6 of 8 in use, needs 4")],
        ["raise max_gpus of queue team to 10: then it runs",
         "or wait until queue team's running work frees 2 untyped GPUs (sweep-a finishing): then"
         " it runs"],
    ),
    # "When the action at the head of the line does not fit, the queue schedules nothing
    # behind it until it does." and "To let the waiting actions that fit run now, switch the
    # policy".
    "behind a blocked strict head": Case(
        "seeds/eight-gpu-strict", "evaluate", WAITING, "blocked_behind_head",
        [(K.HEAD_OF_LINE,
          "behind train at the head of strict_fifo queue team, blocked since 10:00, 2 waiting"
          " behind it (train itself waits: queue team, untyped gpus: 6 of 8 in use, needs 4)")],
        ["switch queue team to greedy_capacity: then it runs"],
    ),
    "action concurrency": Case(
        "seeds/action-concurrency", "three-3", WAITING, "action_concurrency",
        [(K.ACTION_CONCURRENCY, "action concurrency 3 of 3")],
        ["raise action_concurrency of queue three from 3 to 4: then it runs",
         "or wait until queue three's running work frees 1 action slot (three-0 finishing): then"
         " it runs"],
    ),
    "run concurrency, a new run": Case(
        "seeds/run-concurrency", "nightly-2-main", WAITING, "run_concurrency",
        [(K.RUN_CONCURRENCY, "run concurrency 1 of 1; its run nightly-2 is not active yet")],
        ["raise run_concurrency of queue runs-1 from 1 to 2: then it runs",
         "or wait until queue runs-1's running work frees 1 run slot (nightly-1-main finishing):"
         " then it runs"],
    ),
    "depth": Case(
        "seeds/depth", "fill-3", WAITING, "depth",
        [(K.DEPTH, "queue backfill holds at most 3 actions: 1 in flight and 2 queued ahead of it")],
        ["raise depth of queue backfill from 3 to 4: then it runs"],
    ),
    "cluster room at full scale": Case(
        "seeds/caps-do-not-reserve", "alpha-1", WAITING, "cluster_room",
        [(K.CLUSTER_ROOM,
          "cluster east, pool cpu: 0 cpu free at full scale (2 nodes), container main needs"
          " 8 cpu")],
        ["raise max_nodes of pool cpu in cluster east from 2 to 3: then it runs"],
    ),
    # Issue 5's own example sentence.
    "room in the pool, not on one node": Case(
        "explain/node-fit", "train", WAITING, "cluster_room",
        [(K.NODE_FIT,
          "cluster east, pool h100: 8 GPUs free but at most 2 on one node, container main needs"
          " 4 on one node")],
        ["raise max_nodes of pool h100 in cluster east from 4 to 5: then it runs"],
    ),
    # "Priority across queues sharing capacity: higher priority first; it orders, it never
    # preempts."
    "room taken by a higher-priority queue": Case(
        "seeds/priority", "batch-1", WAITING, "lower_priority",
        [(K.LOWER_PRIORITY,
          "cluster east, pool cpu: room went to higher-priority queues prod this tick (8 cpu of"
          " it); without their work 8 cpu would be free on one node, container main needs 8 cpu")],
        ["raise max_nodes of pool cpu in cluster east from 1 to 2: then it runs"],
    ),
    # Neither limit alone keeps it out: a minimal set of two, fixed by the cheaper change.
    "device cap for untyped GPUs and a full pool, together": Case(
        "explain/two-limits", "any-2", WAITING, "cluster_room",
        [(K.DEVICE_CAP,
          "queue inference, nvidia_gpu/nvidia-l4: 1 of 2 in use, needs 2 where untyped"
          " container main lands on nvidia-l4 nodes"),
         (K.CLUSTER_ROOM,
          "cluster mixed, pool t4: 0 GPUs free at full scale (1 node), container main needs 2"
          " GPUs")],
        ["raise max_accelerators nvidia_gpu/nvidia-l4 of queue inference to 3: then it runs",
         "or wait until queue inference's running work frees 1 nvidia_gpu/nvidia-l4 (l4-one"
         " finishing): then it runs"],
    ),
    # "An action that asks for 64 CPUs on a queue capped at 32 does not fit even when the
    # queue is empty." ... "Reduce the request, route the task to a different queue, or raise
    # the cap."
    "infeasible: larger than a cap": Case(
        "seeds/infeasible-cpu-cap", "big", FAILED, "INFEASIBLE",
        [(K.QUEUE_CAP, "requests cpu=64 but queue capped caps cpu at 32")],
        ["raise max_resources cpu of queue capped to 64: then it runs",
         "reduce the cpu request of container main from 64 to 32: then it runs",
         "submit it to queue default, which can run it: then it runs"],
    ),
    "infeasible: a device cap": Case(
        "seeds/warm-pool-start", "big-1", FAILED, "INFEASIBLE",
        [(K.DEVICE_CAP,
          "requests nvidia_gpu/nvidia-t4:4 but queue serve caps nvidia_gpu/nvidia-t4 at 2")],
        ["raise max_accelerators nvidia_gpu/nvidia-t4 of queue serve to 4: then it can run; the"
         " tick re-run with it keeps it waiting for now: queue serve, nvidia_gpu/nvidia-t4: 3 of 4"
         " in use, needs 4"],
    ),
    # "It asks for an accelerator that none of those clusters has."
    "infeasible: no pool has the accelerator": Case(
        "seeds/infeasible-clusters", "wants-h100", FAILED, "INFEASIBLE",
        [(K.NO_ACCELERATOR,
          "cluster east: container main (cpu=4, memory=16Gi, nvidia_gpu/nvidia-h100:1): no node"
          " pool has nvidia_gpu/nvidia-h100 (offers nvidia_gpu/nvidia-t4)")],
        ["ask for nvidia_gpu/nvidia-t4 instead in container main: then it runs",
         "add a node pool h100 like pool west/h100 to cluster east: then it runs",
         "submit it to queue default, which can run it: then it runs"],
    ),
    # "its node selector is compatible with the pool's labels"
    "infeasible: the selector matches no pool": Case(
        "explain/selector", "pinned", FAILED, "INFEASIBLE",
        [(K.SELECTOR,
          "cluster east: container main (cpu=4, memory=32Gi, nvidia_gpu/nvidia-a100:1): node"
          " selector tier=interactive matches no pool's labels (pools with its kind of node:"
          " a100 {tier=batch})")],
        ["set node selector tier=batch in container main (pool a100): then it runs",
         "add a node pool a100-interactive like pool west/a100-interactive to cluster east:"
         " then it runs",
         "submit it to queue default, which can run it: then it runs"],
    ),
    # "One of its containers is larger than any node those clusters can launch."
    "infeasible: larger than any node": Case(
        "seeds/infeasible-clusters", "too-big-container", FAILED, "INFEASIBLE",
        [(K.LARGER_THAN_NODE,
          "cluster east: container main (cpu=48, memory=16Gi, nvidia_gpu/nvidia-t4:1) is larger"
          " than any node (closest: pool t4, cpu 48 > 32)")],
        ["reduce the cpu request of container main from 48 to 32 (a node of pool t4): then it"
         " runs"],
    ),
    # "Its total request is more than those clusters have at full scale."
    "infeasible: larger than the cluster at full scale": Case(
        "seeds/infeasible-clusters", "too-big-total", FAILED, "INFEASIBLE",
        [(K.LARGER_THAN_CLUSTER,
          "cluster east: its total request is more than pools t4 have at full scale"
          " (cpu 72 > 64)")],
        ["raise max_nodes of pool t4 in cluster east from 2 to 3: then it runs"],
    ),
    "infeasible: the queue routes nowhere": Case(
        "explain/no-cluster", "orphan", FAILED, "INFEASIBLE",
        [(K.NO_CLUSTER, "queue parked routes to no cluster")],
        ["submit it to queue open, which can run it: then it runs",
         "submit it to queue default, which can run it: then it runs"],
    ),
    "failed: max_queued_time passed": Case(
        "seeds/expiry", "stale", FAILED, "MAX_QUEUED_TIME_EXCEEDED",
        [(K.EXPIRED, "action stale: queued 3600s, longer than its max_queued_time of 1800s")],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_explanation_reads_as_sentences_with_numbers(name: str) -> None:
    case = CASES[name]
    explanation = explained(case.fixture, case.action)
    assert explanation.state is case.state
    assert explanation.code == case.code
    assert [(item.kind, item.message) for item in explanation.items] == case.items
    assert [s.message for s in explanation.suggestions] == case.suggestions


def _pending(name: str) -> list[str]:
    snapshot, _ = world(name)
    return [a.id for a in snapshot.actions if a.state is ActionState.QUEUED]


ALL_FIXTURES = sorted(
    f"{path.parent.name}/{path.stem}"
    for folder in ("seeds", "explain")
    for path in (FIXTURES / folder).glob("*.yaml")
)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_explanation_of_every_fixture_is_proven(name: str) -> None:
    """Issue 5: "tests apply each suggested change and re-solve to show the action then
    runs; for minimal sets, tests drop each member and show the action then fits"."""
    snapshot, result = world(name)
    found = [problem for action in _pending(name) for problem in prove(snapshot, result, action)]
    assert found == []


def test_every_reason_kind_is_produced_on_the_fixtures() -> None:
    """Issue 5: "Every reason kind above is produced". fits_now and solver_limit need a
    result that is not this snapshot's exact tick; they have tests of their own below."""
    produced = {
        item.kind
        for name in ALL_FIXTURES
        for action in _pending(name)
        for item in explain(world(name)[0], action, world(name)[1]).items
    }
    assert set(ReasonKind) - produced == {ReasonKind.FITS_NOW, ReasonKind.SOLVER_LIMIT}


def test_a_scheduled_action_says_where() -> None:
    explanation = explained("seeds/least-loaded", "job")
    assert explanation.state is ExplanationState.SCHEDULED
    assert explanation.cluster == "west"
    assert explanation.message.startswith("job is scheduled on cluster west: container main on")


def test_a_running_action_says_where_it_runs() -> None:
    snapshot, result = world("seeds/eight-gpu-strict")
    explanation = explain(snapshot, "sweep-a", result)
    assert explanation.state is ExplanationState.SCHEDULED
    assert explanation.message.startswith("sweep-a runs on cluster east: container main on pool")


def test_without_a_result_the_tick_runs_first() -> None:
    snapshot, result = world("seeds/eight-gpu-strict")
    assert explain(snapshot, "evaluate") == explain(snapshot, "evaluate", result)


def test_an_unknown_action_is_not_found() -> None:
    snapshot, result = world("seeds/eight-gpu-strict")
    with pytest.raises(NotFound):
        explain(snapshot, "nope", result)


def test_the_last_ticks_result_on_a_newer_snapshot_fits_now() -> None:
    """The service explains with the last tick's result on a snapshot read later: its
    admissions are running work by then, and work may have finished since."""
    snapshot, result = world("seeds/eight-gpu-strict")
    finished = snapshot.model_copy(
        update={"actions": [a for a in snapshot.actions if a.id != "sweep-a"]}
    )
    explanation = explain(finished, "train", result)
    assert explanation.state is ExplanationState.WAITING
    assert [item.kind for item in explanation.items] == [ReasonKind.FITS_NOW]
    assert scheduled(finished, "train")


def test_a_tick_past_its_time_limit_says_so() -> None:
    """Past its limit, the tick leaves the rest of the line to best-fit, which can miss a
    placement the model would find; the explanation then names the limit."""
    snapshot, result = world("seeds/least-loaded")
    limited = result.model_copy(deep=True)
    limited.scheduled = []
    limited.waiting = [
        WaitingAction(action="job", queue="team", reason=WaitReason.SOLVER_LIMIT, message="")
    ]
    limited.solver.limit_hit = True
    explanation = explain(snapshot, "job", limited)
    assert [item.kind for item in explanation.items] == [ReasonKind.SOLVER_LIMIT]


def test_explanations_round_trip_as_json() -> None:
    explanation = explained("explain/two-limits", "any-2")
    assert Explanation.model_validate_json(explanation.model_dump_json()) == explanation


def test_a_suggestion_applied_to_the_whole_snapshot_lets_an_infeasible_action_in() -> None:
    """A fix for a failed action is checked on the whole snapshot, not a reduced world."""
    snapshot, _ = world("seeds/infeasible-clusters")
    for suggestion in explained("seeds/infeasible-clusters", "too-big-total").suggestions:
        changed = apply_changes(snapshot, "too-big-total", suggestion.changes)
        assert "too-big-total" not in {f.action for f in tick(changed, OPTIONS).failed}


def test_with_no_fleet_described_placement_cannot_be_judged() -> None:
    """Fail-fast lets an action wait while no cluster is described; so does the explanation."""
    snapshot = SnapshotBuilder().queue("q").queued("a", queue="q", cpu="1").build()
    explanation = explain(snapshot, "a")
    assert explanation.state is ExplanationState.WAITING
    assert [(i.kind, i.message) for i in explanation.items] == [
        (ReasonKind.NO_CLUSTER, "no cluster is described yet, so its placement cannot be judged")
    ]


def test_a_cap_goes_as_high_as_the_actions_it_lets_in_first_and_names_them() -> None:
    """Issue 18: "if a cap must go to 4 rather than 2 because earlier actions also become
    admissible, say 4, and name who else the change lets in". Raising max_gpus to the 3 that
    a5 needs lets a2, ahead of it, in first; only 5 lets both in."""
    snapshot = (
        SnapshotBuilder()
        .queue("q0", max_gpus=2)
        .cluster("east")
        .pool("cpu", cpu="32", memory="128Gi")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=4, nodes=2)
        .running("a0", queue="q0", gpu=1, on=("east", "t4", 0))
        .queued("a2", queue="q0", gpu=2)
        .queued("a4", queue="q0", cpu="1")
        .queued("a5", queue="q0", gpu=2)
        .build()
    )
    result = tick(snapshot, OPTIONS)
    assert [s.action for s in result.scheduled] == ["a4"]
    explanation = explain(snapshot, "a5", result, OPTIONS)
    assert [s.message for s in explanation.suggestions] == [
        "raise max_gpus of queue q0 to 5: then a2 and a5 run"
    ]
    assert explanation.suggestions[0].also_runs == ["a2"]
    # a0 finishing frees 1 GPU, which a2 takes first: no wait lets a5 in.
    assert explanation.ruled_out == [
        "wait until queue q0's running work frees 1 untyped GPU (a0 finishing) (the most of it"
        " tried): the tick re-run with it still does not run it: queue q0, untyped gpus: 2 of 2"
        " in use, needs 2"
    ]
    assert prove(snapshot, result, "a5") == []


def test_a_cap_raised_for_a_chain_ahead_is_found_from_the_largest_ones_walk() -> None:
    """The most of a cap lets a2 to a5 in ahead of a9; what they take says 8 is enough, and
    7 (the rung below) is shown not to be, without bisecting the rungs between (D252)."""
    snapshot = (
        SnapshotBuilder()
        .queue("q0", max_gpus=2)
        .cluster("east")
        .pool("cpu", cpu="32", memory="128Gi")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=4, nodes=2)
        .running("a0", queue="q0", gpu=1, on=("east", "t4", 0))
        .queued("a1", queue="q0", gpu=1)
        .queued("a2", queue="q0", gpu=1)
        .queued("a3", queue="q0", gpu=1)
        .queued("a4", queue="q0", gpu=1)
        .queued("a5", queue="q0", gpu=1)
        .queued("a9", queue="q0", gpu=2)
        .build()
    )
    result = tick(snapshot, OPTIONS)
    explanation = explain(snapshot, "a9", result, OPTIONS)
    assert explanation.suggestions[0].message == (
        "raise max_gpus of queue q0 to 8: then a2, a3, a4, a5 and a9 run"
    )
    # The model's 4, the most (8, which its walk says is just enough) and 7; then one wait
    # (a0 and a1 finishing). Bisecting would have walked 6 as well.
    assert explanation.replays == 3 + 1
    below = explanation.suggestions[0].changes[0].model_copy(update={"value": 7})
    assert not scheduled(apply_changes(snapshot, "a9", [below]), "a9")
    assert prove(snapshot, result, "a9") == []


def _offered(snapshot: Snapshot, action_id: str) -> tuple[TickResult, list[str]]:
    """The tick of `snapshot`, and the suggestions offered for the action, every one of them
    proven by a whole tick of the snapshot it changes (`prove`)."""
    result = tick(snapshot, OPTIONS)
    assert prove(snapshot, result, action_id) == []
    return result, [s.message for s in explain(snapshot, action_id, result).suggestions]


def test_a_device_the_cluster_lacks_under_a_label_no_pool_of_it_has_is_fixed_in_two_steps() -> None:
    """Issue 18: "The infeasible side (fixes that make a failed action feasible) gets the same
    rule: after the change, the action is not INFEASIBLE and the tick runs it or says why it
    now waits." The queue runs only in `east`, which has no L4; the only L4 pool (in `west`)
    lacks the label the container selects. No single change fixes it: the pool is copied into
    `east` and the selector dropped (a random fleet, seed 201 of 600, had no suggestion)."""
    snapshot = (
        SnapshotBuilder()
        .queue("q", clusters=["east"])
        .cluster("west")
        .pool("l4", cpu="8", memory="32Gi", accelerator="nvidia_gpu/nvidia-l4", accelerators=2)
        .cluster("east")
        .pool("b", cpu="4", memory="32Gi", labels={"tier": "b"})
        .queued("a", queue="q", gpu="nvidia_gpu/nvidia-l4:1", selector={"tier": "b"})
        .build()
    )
    result, offered = _offered(snapshot, "a")
    assert [f.action for f in result.failed] == ["a"]
    assert offered[0] == (
        "add a node pool l4 like pool west/l4 to cluster east; drop node selector tier=b from"
        " container main (pool l4): then it runs"
    )


def test_nodes_added_in_one_cluster_let_in_first_work_routed_only_to_another() -> None:
    """Issue 18: "if a cap must go to 4 rather than 2 because earlier actions also become
    admissible, say 4, and name who else the change lets in". A node more in `west` would
    hold x; but then a9 (free to run anywhere) moves there out of `east`, where a7, routed
    only to `east` and ahead of x, gets in first and x still waits. Two nodes more let both
    in. (A proof used to keep a7's refusal for room, its queue not being routed to `west`.)"""
    snapshot = (
        SnapshotBuilder()
        .queue("anywhere", scheduling="greedy_capacity")
        .queue("east-only", clusters=["east"])
        .cluster("east")
        .pool("cpu", cpu="8", memory="32Gi", max_nodes=1)
        .cluster("west")
        .pool("cpu", cpu="8", memory="32Gi", max_nodes=1)
        .running("held", queue="east-only", cpu="6", on=("west", "cpu", 0))
        .queued("a9", queue="anywhere", cpu="4")
        .queued("a7", queue="east-only", cpu="6")
        .queued("x", queue="anywhere", cpu="5")
        .build()
    )
    result, offered = _offered(snapshot, "x")
    assert [s.action for s in result.scheduled] == ["a9"]
    assert offered == ["raise max_nodes of pool cpu in cluster west from 1 to 3: then a7 and x run"]


def test_replicas_that_lack_the_same_kind_of_node_copy_one_pool() -> None:
    """Issue 18: "The infeasible side (fixes that make a failed action feasible) gets the same
    rule". Both replicas of the environment need an NVIDIA node `east` lacks: the fix copies
    the pool once (it used to say so twice, and to add two pools of one name)."""
    snapshot = (
        SnapshotBuilder()
        .queue("q", clusters=["east"])
        .cluster("west")
        .pool("l4", cpu="8", memory="32Gi", accelerator="nvidia_gpu/nvidia-l4", accelerators=4)
        .cluster("east")
        .pool("cpu", cpu="8", memory="32Gi")
        .environment("e", queue="q", replicas=2, cpu="1", gpu=2)
        .queued("a", queue="q", environment="e")
        .build()
    )
    result, offered = _offered(snapshot, "a")
    assert [f.action for f in result.failed] == ["a"]
    assert offered == ["add a node pool l4 like pool west/l4 to cluster east: then it runs"]


def test_a_container_larger_than_every_node_of_its_kind_has_its_request_reduced() -> None:
    """Issue 18: "The infeasible side (fixes that make a failed action feasible) gets the same
    rule: after the change, the action is not INFEASIBLE and the tick runs it or says why it
    now waits." a3 asks for H100s and TPUs, over its queue's caps, and no cluster has both; its
    TPU container's 11 CPUs are more than any TPU node's 8. A copy of the TPU pool is no larger,
    so after it the request is reduced; the fix used to copy the pool again each round and
    offer nothing, nor rule anything out (seed 3091 of the random fleets of a dozen)."""
    snapshot = random_snapshot(random.Random(3091), DOZEN)
    result = tick(snapshot, OPTIONS)
    explanation = explain(snapshot, "a3", result)
    assert explanation.state is ExplanationState.FAILED
    assert any(
        "add a node pool" in s.message and "reduce the cpu request of container c1" in s.message
        for s in explanation.suggestions
    )
    assert prove(snapshot, result, "a3") == []
