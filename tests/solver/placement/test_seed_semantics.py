"""Every semantics line of issue 2, checked on the seed fixtures (fixtures/seeds/).

Each fixture's complete expected outcome is in EXPECTED (the same table is in
docs/testing.md, "Seed fixtures"); the tests below each quote the seed
sentence they check and assert the details that sentence is about, with a comment on
why the outcome is the right one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache

import pytest

from fixtures import SEEDS
from models.errors import ErrorCode
from models.result import ScheduledAction, TickResult
from models.scenario import load_scenario
from models.snapshot import Snapshot
from solver import TickOptions, tick
from tests.support.builders import NOW, SnapshotBuilder, ctr
from tests.support.checks import decisions, problems

SEEDS = SEEDS
OPTIONS = TickOptions(time_limit_s=5.0)

H100 = "nvidia_gpu/nvidia-h100"
T4 = "nvidia_gpu/nvidia-t4"
L4 = "nvidia_gpu/nvidia-l4"
INFEASIBLE = ErrorCode.INFEASIBLE


@dataclass(frozen=True)
class Expected:
    """A fixture's outcome. `waiting` maps an action to `reason` or `reason:resource`;
    `*` accepts any reason where the spec does not single one out."""

    scheduled: set[str]
    waiting: dict[str, str] = field(default_factory=dict)
    failed: dict[str, ErrorCode] = field(default_factory=dict)


EXPECTED: dict[str, Expected] = {
    "action-concurrency": Expected(
        {"three-1", "three-2"},
        {
            "serial-1": "action_concurrency",
            "serial-2": "action_concurrency",
            "three-3": "action_concurrency",
            "three-4": "action_concurrency",
        },
    ),
    "caps-across-clusters": Expected({"t4-job"}, {"one-more": f"queue_cap:{H100}"}),
    "caps-count-requests": Expected({"huge-memory"}, {"one-more-cpu": "queue_cap:cpu"}),
    "caps-do-not-reserve": Expected(
        {"beta-1", "beta-2", "beta-3", "beta-4"}, {"alpha-1": "cluster_room"}
    ),
    "cluster-full": Expected(
        {"mix-small"},
        {
            "line-big": "cluster_room",
            "line-small": "blocked_behind_head",
            "mix-big": "cluster_room",
        },
    ),
    "depth": Expected({"fill-1", "fill-2"}, {"fill-3": "depth", "fill-4": "depth"}),
    "eight-gpu-greedy": Expected({"evaluate", "embed"}, {"train": "queue_cap:gpu"}),
    "eight-gpu-strict": Expected(
        set(),
        {
            "train": "queue_cap:gpu",
            "evaluate": "blocked_behind_head",
            "embed": "blocked_behind_head",
        },
    ),
    "eight-gpu-strict-2-freed": Expected(
        {"train"}, {"evaluate": "queue_cap:gpu", "embed": "blocked_behind_head"}
    ),
    "eight-gpu-strict-3-train-running": Expected({"evaluate", "embed"}),
    "expiry": Expected(
        {"patient", "fresh"},
        failed={
            "stale": ErrorCode.MAX_QUEUED_TIME_EXCEEDED,
            "late-abs": ErrorCode.DEADLINE_EXCEEDED,
            "late-rel": ErrorCode.DEADLINE_EXCEEDED,
        },
    ),
    "gang-vs-stream-greedy": Expected(
        {"one-gpu-1", "one-gpu-2", "one-gpu-3", "one-gpu-4"}, {"gang": "cluster_room"}
    ),
    "gang-vs-stream-strict": Expected(
        set(),
        {"gang": "cluster_room"} | {f"one-gpu-{i}": "blocked_behind_head" for i in range(1, 5)},
    ),
    "gang-vs-stream-strict-freed": Expected(
        {"gang"},
        {"one-gpu-1": "*"} | {f"one-gpu-{i}": "blocked_behind_head" for i in range(2, 5)},
    ),
    "infeasible-clusters": Expected(
        {"fits"},
        failed={
            "wants-h100": INFEASIBLE,
            "wants-tpu": INFEASIBLE,
            "too-big-container": INFEASIBLE,
            "too-big-total": INFEASIBLE,
        },
    ),
    "infeasible-cpu-cap": Expected({"small"}, failed={"big": INFEASIBLE}),
    "l4-untyped": Expected({"any-1"}, {"any-2": "*"}),
    "least-loaded": Expected({"job"}),
    "lowered-cap-below-request": Expected({"narrow"}, failed={"wide": INFEASIBLE}),
    "lowered-cap-below-use": Expected({"cpu-only"}, {"wants-memory": "queue_cap:memory"}),
    "mixed-gpu": Expected(
        {"any-1", "any-2", "h100-1", "h100-2"},
        {"any-3": "queue_cap:gpu", "h100-3": f"queue_cap:{H100}"},
    ),
    "partition-cap": Expected(
        {"slice-3", "whole-2"}, {"slice-2": "queue_cap:nvidia_gpu/nvidia-a100/1g.5gb"}
    ),
    "org-default-gpu": Expected({"any-2", "h100-1"}, {"any-1": f"queue_cap:{T4}"}),
    "priority": Expected({"prod-1"}, {"batch-1": "lower_priority"}),
    "run-concurrency": Expected(
        {"child-1", "child-2", "child-3", "idle-a1", "idle-a2"},
        {
            "nightly-2-main": "run_concurrency",
            "nightly-2-child": "run_concurrency",
            "idle-b1": "run_concurrency",
        },
    ),
    "seed-cli-queues": Expected(
        {f"sweep-{i}" for i in range(1, 7)} | {"nightly-eval"},
        {"sweep-7": f"queue_cap:{H100}", "sweep-8": f"queue_cap:{H100}"},
    ),
    "t4-when-h100-capped": Expected({"t4-work", "l4-work"}, {"more-h100": f"queue_cap:{H100}"}),
    "untyped-is-nvidia": Expected({"tpu-job", "mixed-any-gpu"}, failed={"tpu-any-gpu": INFEASIBLE}),
    "warm-pool-running": Expected(
        {"embed-1", "embed-2"}, {"t4-task": f"queue_cap:{T4}", "embed-3": "action_concurrency"}
    ),
    "warm-pool-strict-stall": Expected(
        set(),
        {
            "big-job": f"queue_cap:{T4}",
            "embed-1": "blocked_behind_head",
            "embed-2": "blocked_behind_head",
        },
    ),
    "warm-pool-start": Expected(
        {"embed-1", "embed-2", "embed-3"}, {"t4-task": f"queue_cap:{T4}"}, {"big-1": INFEASIBLE}
    ),
}


@cache
def snapshot(name: str) -> Snapshot:
    return load_scenario(SEEDS / f"{name}.yaml")


@cache
def solve(name: str) -> TickResult:
    return tick(snapshot(name), OPTIONS)


def scheduled(result: TickResult) -> dict[str, ScheduledAction]:
    return {s.action: s for s in result.scheduled}


def waits(result: TickResult) -> dict[str, str]:
    return {
        w.action: f"{w.reason}:{w.resource}" if w.resource else str(w.reason)
        for w in result.waiting
    }


def failure(result: TickResult, action: str) -> tuple[ErrorCode, str]:
    found = {f.action: f for f in result.failed}[action]
    return found.code, found.message


def charges(result: TickResult, queue: str) -> dict[str, int]:
    """Accelerator charges without zero entries (whether a zero is listed is presentation)."""
    return {k: v for k, v in result.queues[queue].accelerator_charges.items() if v}


# -- every fixture ---------------------------------------------------------------


def test_every_seed_fixture_has_an_expected_outcome() -> None:
    assert {p.name.removesuffix(".yaml") for p in SEEDS.glob("*.yaml")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_outcome(name: str) -> None:
    """The whole outcome of each seed fixture: who runs, who fails with which code, who waits
    and why (docs/testing.md lists the same table)."""
    expected, result = EXPECTED[name], solve(name)
    assert set(scheduled(result)) == expected.scheduled
    assert {f.action: f.code for f in result.failed} == expected.failed
    got = waits(result)
    assert set(got) == set(expected.waiting)
    for action, reason in expected.waiting.items():
        if reason != "*":
            assert got[action] == reason, action


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_result_is_sound(name: str) -> None:
    """Placements fit, caps and limits hold, strict lines are prefixes (tests/support/checks.py)."""
    assert problems(snapshot(name), solve(name)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_result_is_deterministic(name: str) -> None:
    # "Deterministic: the same snapshot always gives the same result (fixed solver seed,
    # stable tie-breaks), so ticks do not flap."
    first = decisions(tick(snapshot(name), OPTIONS))
    assert decisions(tick(snapshot(name), OPTIONS)) == first


# -- what a cap counts -----------------------------------------------------------


def test_cap_counts_requests_of_running_and_scheduled_work() -> None:
    # "A cap limits the total resources requested by the actions a queue has scheduled and
    # that have not finished. It adds up what each action asks for in its resources."
    # running asks 4 CPUs, huge-memory 4: the cpu cap of 8 is then full, so one-more-cpu
    # (1 CPU) waits; the usage reported is the requests, 8 CPUs.
    result = solve("caps-count-requests")
    assert "huge-memory" in scheduled(result)
    assert waits(result)["one-more-cpu"] == "queue_cap:cpu"
    assert result.queues["team"].in_flight_resources["cpu"] == 8_000  # millicores


def test_cap_applies_only_to_named_resources() -> None:
    # "A cap applies only to the resources you name. --max-resources cpu=512 caps CPU and
    # leaves memory unlimited." 500Gi + 600Gi of memory run under a queue that names no
    # memory cap.
    result = solve("caps-count-requests")
    assert "huge-memory" in scheduled(result)
    assert "memory" not in result.queues["team"].max_resources
    assert result.queues["team"].in_flight_resources["memory"] == 1100 * 2**30


def test_one_cap_across_all_clusters_of_the_queue() -> None:
    # "A queue has one cap for all the clusters it routes to." 4 H100 on east + 4 on west fill
    # the cap of 8 although each cluster alone is at half of it and has room.
    result = solve("caps-across-clusters")
    assert waits(result)["one-more"] == f"queue_cap:{H100}"
    assert charges(result, "team")[H100] == 8


def test_unnamed_device_types_are_unlimited() -> None:
    # "Each type has its own cap. A task that asks for T4s counts against the T4 cap only, so a
    # team that has reached its H100 cap can still run T4 work. A type you do not name is
    # unlimited." The queue is at 48 of 48 H100; T4 (capped at 32) and L4 (not capped) run.
    result = solve("t4-when-h100-capped")
    assert {"t4-work", "l4-work"} <= set(scheduled(result))
    assert waits(result)["more-h100"] == f"queue_cap:{H100}"


def test_any_named_resource_can_be_capped() -> None:
    # Issue 2: "max_resources (cpu, memory, any named resource; only the named ones are
    # capped)". 80Gi of ephemeral storage run; 30Gi more would pass the 100Gi cap, 20Gi fits.
    snap = (
        SnapshotBuilder()
        .queue("team", max_resources={"ephemeral-storage": "100Gi"})
        .cluster("east")
        .pool("disk", cpu="32", memory="128Gi", resources={"ephemeral-storage": "1Ti"}, nodes=1)
        .running("r", queue="team", on=("east", "disk", 0), **{"ephemeral-storage": "80Gi"})
        .queued("big", queue="team", **{"ephemeral-storage": "30Gi"})
        .queued("small", queue="team", **{"ephemeral-storage": "20Gi"})
        .build()
    )
    result = tick(snap, OPTIONS)
    assert set(scheduled(result)) == {"small"}
    assert waits(result) == {"big": "queue_cap:ephemeral-storage"}


def test_partition_has_its_own_cap() -> None:
    # "To cap one partition size of a device, add the partition: A100/1g.5gb=4." 3 slices run,
    # 2 more would make 5; whole A100s are another type and uncapped.
    result = solve("partition-cap")
    assert waits(result) == {"slice-2": "queue_cap:nvidia_gpu/nvidia-a100/1g.5gb"}
    assert [c.node_pool for c in scheduled(result)["slice-3"].containers] == ["mig"]
    assert [c.node_pool for c in scheduled(result)["whole-2"].containers] == ["a100"]


def test_caps_reserve_nothing() -> None:
    # "A cap does not reserve capacity. The caps of queues that share clusters can add up to
    # more than the clusters have, so a busy team can use capacity that an idle team is not
    # using." beta takes all 32 CPUs; alpha, far under its own cap, finds no room.
    result = solve("caps-do-not-reserve")
    assert {"beta-1", "beta-2", "beta-3", "beta-4"} == set(scheduled(result))
    assert waits(result)["alpha-1"] == "cluster_room"


# -- typed and untyped GPUs ------------------------------------------------------


def test_typed_and_untyped_caps_are_independent() -> None:
    # "In the example, the queue can have 8 untyped GPUs and 10 H100s scheduled at the same
    # time." The untyped requests come first in line but must end on the A100 node: on an
    # H100 they would also count against the H100 cap and leave no room for h100-1/h100-2.
    result = solve("mixed-gpu")
    placed = scheduled(result)
    assert {"any-1", "any-2", "h100-1", "h100-2"} == set(placed)
    assert {c.node_pool for a in ("any-1", "any-2") for c in placed[a].containers} == {"a100"}
    assert charges(result, "mixed-gpu")["gpu"] == 8
    assert charges(result, "mixed-gpu")[H100] == 10


def test_untyped_request_landing_on_a_capped_type_counts_against_both() -> None:
    # "On a cluster with T4, L4, and A10G nodes and a queue that caps L4s, a gpu=1 task that
    # lands on an L4 counts against both --max-gpus and the L4 cap." T4 and A10G are full, so
    # any-1 lands on an L4; any-2 then waits although the second L4 node is empty.
    result = solve("l4-untyped")
    assert [c.node_pool for c in scheduled(result)["any-1"].containers] == ["l4"]
    assert charges(result, "inference") == {"gpu": 1, L4: 1}
    assert "any-2" in waits(result)


@pytest.mark.parametrize(("cap", "running"), [(1, None), (3, "L4:2")])
def test_untyped_and_typed_containers_of_one_action_share_the_type_cap(
    cap: int, running: str | None
) -> None:
    # "If it chooses a device that has its own cap, the request counts against that cap as
    # well." The action asks L4:1 and gpu=1; the only NVIDIA GPUs are L4, so it charges 2 L4
    # against a cap with room for 1: it must not be scheduled (with cap 1 it can never run and
    # fails INFEASIBLE: tests/solver/placement/test_failfast_per_action.py).
    builder = (
        SnapshotBuilder()
        .queue("team", max_accelerators={"L4": cap})
        .cluster("east")
        .pool("l4", cpu="32", memory="128Gi", accelerator="L4", accelerators=4, nodes=2)
    )
    if running is not None:
        builder.running("old", queue="team", gpu=running, on=("east", "l4", 0))
    snap = builder.queued(
        "mixed", queue="team", containers=[ctr("typed", gpu="L4:1"), ctr("any", gpu=1)]
    ).build()
    result = tick(snap, OPTIONS)
    assert "mixed" not in scheduled(result)
    assert problems(snap, result) == []


def test_org_default_gpu_type_makes_untyped_requests_typed() -> None:
    # "If your organization has a default GPU type in its settings, an untyped request is
    # treated as a request for that type. It counts against that type's cap in
    # --max-accelerators." gpu=2 runs on T4 though max_gpus is 1 (it is not an untyped request
    # any more); gpu=1 then waits on the T4 cap although the H100 node has room.
    result = solve("org-default-gpu")
    assert [c.node_pool for c in scheduled(result)["any-2"].containers] == ["t4"]
    assert waits(result)["any-1"] == f"queue_cap:{T4}"
    assert charges(result, "team") == {T4: 2, H100: 1}


def test_only_nvidia_gpus_can_be_untyped() -> None:
    # "Only NVIDIA GPUs can be requested without a type, so --max-gpus applies to NVIDIA GPUs.
    # Tasks that use TPUs or other accelerators always name the device."
    result = solve("untyped-is-nvidia")
    # max_gpus 0 does not hold back a TPU request.
    assert "tpu-job" in scheduled(result)
    # gpu=1 where only TPUs are: no NVIDIA GPU to give it, ever.
    assert failure(result, "tpu-any-gpu")[0] is INFEASIBLE
    # With TPU and T4 pools routed, gpu=1 lands on the T4, never on the TPU pool.
    placed = scheduled(result)["mixed-any-gpu"]
    assert (placed.cluster, [c.node_pool for c in placed.containers]) == ("gpu-west", ["t4"])


# -- limits together -------------------------------------------------------------


def test_action_concurrency() -> None:
    # "A queue with a cap of 1 serializes its work; a cap of 3 lets at most three run
    # concurrently and holds the rest until a slot frees up."
    result = solve("action-concurrency")
    assert {"three-1", "three-2"} == set(scheduled(result))  # 1 running + 2 = 3
    assert result.queues["serial"].running_actions == 1


def test_run_concurrency_does_not_limit_children_of_an_active_run() -> None:
    # "Run concurrency: the maximum number of runs on the queue that are active at once.
    # Children of an active run aren't capped by this; only the runs themselves are."
    result = solve("run-concurrency")
    placed = set(scheduled(result))
    assert {"child-1", "child-2", "child-3"} <= placed  # nightly-1 is active
    assert waits(result)["nightly-2-main"] == "run_concurrency"  # a second run would overlap
    # On the idle queue the first run in line becomes the active one; its later child joins it.
    assert {"idle-a1", "idle-a2"} <= placed
    assert waits(result)["idle-b1"] == "run_concurrency"


def test_depth_limits_what_the_queue_holds() -> None:
    # "Depth: the total number of in-flight plus waiting items the queue will hold." Depth 3
    # with one running: the first two in line are held and run, the rest wait for depth.
    result = solve("depth")
    assert {"fill-1", "fill-2"} == set(scheduled(result))
    assert waits(result) == {"fill-3": "depth", "fill-4": "depth"}


def test_scheduled_only_when_every_limit_holds_together() -> None:
    # "An action is scheduled only when it fits under the queue's run concurrency, action
    # concurrency, depth, and resource caps together." Each waiting action below passes every
    # limit but one.
    snap = (
        SnapshotBuilder()
        .queue("q", max_resources={"cpu": "8"}, action_concurrency=3, run_concurrency=2, depth=9)
        .cluster("east")
        .pool("cpu", cpu="64", memory="256Gi", nodes=1)
        .running("r1", queue="q", run="run-a", cpu="2", on=("east", "cpu", 0))
        .queued("fits", queue="q", run="run-a", cpu="2")  # cpu 4, 2 actions, 1 run
        .queued("too-much-cpu", queue="q", run="run-a", cpu="6")  # cpu 10 > 8
        .queued("new-run", queue="q", run="run-b", cpu="1")  # cpu 5, 3 actions, 2 runs
        .queued("third-run", queue="q", run="run-c", cpu="1")  # 3 runs > 2
        .queued("fourth-action", queue="q", run="run-a", cpu="1")  # 4 actions > 3
        .build()
    )
    result = tick(snap, OPTIONS)
    assert set(scheduled(result)) == {"fits", "new-run"}
    assert waits(result) == {
        "too-much-cpu": "queue_cap:cpu",
        "third-run": "run_concurrency",
        "fourth-action": "action_concurrency",
    }


# -- scheduling policies -----------------------------------------------------------


def test_greedy_capacity_runs_what_fits_behind_a_waiting_action() -> None:
    # "Under greedy capacity the queue runs at 8 of 8 GPUs, and train starts once 4 GPUs are
    # free at the same moment."
    result = solve("eight-gpu-greedy")
    assert waits(result) == {"train": "queue_cap:gpu"}
    assert charges(result, "team")["gpu"] == 8
    assert not result.queues["team"].head_blocked  # greedy queues never block


def test_strict_fifo_head_blocks_the_line() -> None:
    # "Under strict FIFO the queue stays at 6 of 8 until 2 more GPUs free up." / "When the
    # action at the head of the line does not fit, the queue schedules nothing behind it until
    # it does." / "In Python, Queue.details returns head_blocked and head_blocked_since."
    result = solve("eight-gpu-strict")
    metrics = result.queues["team"]
    assert result.scheduled == []
    assert charges(result, "team")["gpu"] == 6
    assert metrics.head_blocked
    assert metrics.head_blocked_since == NOW  # blocked first at this tick
    assert metrics.head_action == "train"
    assert metrics.blocked_behind_head == 2


def test_strict_fifo_then_train_starts_followed_by_evaluate_and_embed() -> None:
    # "Then train starts, followed by evaluate and embed."
    # Second tick: 2 more GPUs free (4 of 8 in use), train takes them: 8 of 8.
    second = solve("eight-gpu-strict-2-freed")
    assert set(scheduled(second)) == {"train"}
    assert charges(second, "team")["gpu"] == 8
    assert second.queues["team"].head_action == "evaluate"
    # Third tick: train runs, sweep-a finished: evaluate and embed start, the line is clear.
    third = solve("eight-gpu-strict-3-train-running")
    assert set(scheduled(third)) == {"evaluate", "embed"}
    assert not third.queues["team"].head_blocked
    assert third.queues["team"].head_blocked_since is None


def test_head_blocked_since_is_kept_while_the_same_head_stays_blocked() -> None:
    # "A strict FIFO queue reports when its head is blocked and for how long." The previous
    # tick saw train blocked at 10:00; five minutes later it still is, so the time stays.
    since = NOW - timedelta(minutes=5)
    snap = snapshot("eight-gpu-strict")
    queues = [q.model_copy(update={"head_blocked_since": since}) for q in snap.queues]
    result = tick(snap.model_copy(update={"queues": queues}), OPTIONS)
    assert result.queues["team"].head_blocked
    assert result.queues["team"].head_blocked_since == since


def test_gang_job_keeps_the_freed_capacity_on_strict_fifo() -> None:
    # "A distributed training job that needs 32 GPUs at once starts only when 32 are free
    # together. Under greedy capacity, a steady stream of one-GPU actions can take each GPU as
    # it frees up, and the large job never starts."
    strict, greedy = solve("gang-vs-stream-strict"), solve("gang-vs-stream-greedy")
    assert strict.scheduled == [] and strict.queues["train"].head_action == "gang"
    assert set(scheduled(greedy)) == {f"one-gpu-{i}" for i in range(1, 5)}
    # "As running work finishes, the freed capacity accumulates for the head of the line":
    # with all 32 GPUs free, the gang gets one whole node per worker.
    freed = scheduled(solve("gang-vs-stream-strict-freed"))
    assert sorted(c.node for c in freed["gang"].containers) == [0, 1, 2, 3]


def test_global_order_is_priority_then_submission_then_list_position() -> None:
    # "Both policies consider actions in the order they were queued." Ties in submitted_at
    # fall back to the order of the actions list; priority comes before both. One 4-CPU node
    # has room for exactly one of these 4-CPU actions.
    at = NOW - timedelta(minutes=10)
    snap = (
        SnapshotBuilder()
        .queue("low", priority=0)
        .queue("high", priority=5)
        .cluster("east")
        .pool("cpu", cpu="4", memory="16Gi", nodes=1)
        .queued("low-earliest", queue="low", cpu="4", at=at - timedelta(minutes=5))
        .queued("listed-first", queue="high", cpu="4", at=at)
        .queued("listed-second", queue="high", cpu="4", at=at)
        .build()
    )
    assert set(scheduled(tick(snap, OPTIONS))) == {"listed-first"}
    low, first, second = snap.actions
    swapped = snap.model_copy(update={"actions": [low, second, first]})
    assert set(scheduled(tick(swapped, OPTIONS))) == {"listed-second"}


def test_priority_orders_but_never_preempts() -> None:
    # "Priority: when several queues share the same cluster capacity, higher priority work is
    # scheduled ahead of lower priority work. Priority controls ordering, not preemption: a
    # lower-priority task that has already started is not interrupted."
    result = solve("priority")
    assert set(scheduled(result)) == {"prod-1"}  # submitted after batch-1, scheduled first
    assert waits(result)["batch-1"] == "lower_priority"
    assert result.failed == []  # batch-0 is not touched
    assert result.queues["batch"].running_actions == 1
    assert result.queues["batch"].in_flight_resources["cpu"] == 8_000  # millicores


# -- reusable environments -------------------------------------------------------


def test_warm_pool_is_charged_once_when_it_starts() -> None:
    # "A queue counts those containers against its caps once, when the pool starts. The first
    # action of an environment starts the pool ... Later actions that join the running pool add
    # nothing to the cap."
    result = solve("warm-pool-start")
    [start] = result.environments_started
    assert (start.environment, len(start.containers)) == ("embedder", 2)
    assert {"embed-1", "embed-2", "embed-3"} == set(scheduled(result))
    assert charges(result, "serve") == {T4: 2}  # 2 replicas, not 2 per action
    # "it has to fit under the cap at the size of the containers the pool starts with":
    # big-embedder starts with 4 T4 replicas, more than the cap of 2 even on an empty queue.
    assert failure(result, "big-1")[0] is INFEASIBLE


def test_joining_a_running_pool_adds_nothing_but_counts_as_an_action() -> None:
    # "Later actions that join the running pool add nothing to the cap." The T4 cap is full
    # with the pool's replicas, yet embed-1 and embed-2 run (in the pool, on no new node);
    # action concurrency 3 still counts them: embed-3 waits.
    result = solve("warm-pool-running")
    placed = scheduled(result)
    assert all(placed[a].cluster is None and placed[a].containers == [] for a in placed)
    assert result.environments_started == []
    assert waits(result)["t4-task"] == f"queue_cap:{T4}"
    assert waits(result)["embed-3"] == "action_concurrency"


def test_large_head_stalls_reusable_environments_on_strict_fifo() -> None:
    # "On a strict FIFO queue with little free capacity, one large job at the head of the line
    # stalls every reusable environment on the queue." Joining the running pool would add
    # nothing, yet the strict line holds embed-1 and embed-2 behind big-job.
    result = solve("warm-pool-strict-stall")
    assert result.scheduled == []
    assert result.queues["mixed-line"].head_action == "big-job"
    assert result.queues["mixed-line"].blocked_behind_head == 2


def test_warm_pool_that_does_not_fit_now_waits() -> None:
    # "The first action of an environment starts the pool, and it has to fit under the cap at
    # the size of the containers the pool starts with." 2 T4 replicas fit the cap of 3 only
    # while the running T4:2 task does not hold it: the pool's first action waits, not fails.
    snap = (
        SnapshotBuilder()
        .queue("serve", max_accelerators={"T4": 3})
        .cluster("east")
        .pool("t4", cpu="32", memory="128Gi", accelerator="T4", accelerators=4, nodes=2)
        .environment("embedder", queue="serve", replicas=2, cpu="2", gpu="T4:1")
        .running("task", queue="serve", gpu="T4:2", on=("east", "t4", 0))
        .queued("embed-1", queue="serve", environment="embedder")
        .build()
    )
    result = tick(snap, OPTIONS)
    assert waits(result) == {"embed-1": f"queue_cap:{T4}"}
    assert result.environments_started == []


# -- resource-aware placement ------------------------------------------------------


def test_placement_only_on_routed_clusters() -> None:
    # "It considers only the clusters that can run the action." The queue routes to east, which
    # is full; west has room but is not the queue's: the action waits.
    snap = (
        SnapshotBuilder()
        .queue("east-only", clusters=["east"])
        .queue("other")
        .cluster("east")
        .pool("cpu", cpu="8", memory="32Gi", nodes=1)
        .cluster("west")
        .pool("cpu", cpu="8", memory="32Gi", nodes=1)
        .running("busy", queue="other", cpu="8", on=("east", "cpu", 0))
        .queued("job", queue="east-only", cpu="2")
        .build()
    )
    assert waits(tick(snap, OPTIONS)) == {"job": "cluster_room"}


def test_container_goes_to_a_pool_whose_accelerator_and_labels_match() -> None:
    # "Each container the action asks for must fit on a node of some node pool in the cluster:
    # its requests fit one node, the pool has its accelerator, and its node selector is
    # compatible with the pool's labels."
    snap = (
        SnapshotBuilder()
        .queue("q")
        .cluster("east")
        .pool("spot", cpu="16", memory="64Gi", labels={"tier": "spot"}, nodes=1)
        .pool("ondemand", cpu="16", memory="64Gi", labels={"tier": "ondemand"}, nodes=1)
        .pool("t4", cpu="16", memory="64Gi", accelerator="T4", accelerators=2, nodes=1)
        .queued(
            "job",
            queue="q",
            containers=[ctr("web", cpu="2", selector={"tier": "ondemand"}), ctr("gpu", gpu="T4:1")],
        )
        .build()
    )
    [placed] = tick(snap, OPTIONS).scheduled
    assert {c.name: c.node_pool for c in placed.containers} == {"web": "ondemand", "gpu": "t4"}


def test_full_cluster_makes_work_wait_and_blocks_a_strict_line() -> None:
    # "An action that fits a cluster's node pools but not the room left at full scale stays
    # queued under the queue's scheduling policy. On a strict FIFO queue it blocks the line."
    result = solve("cluster-full")
    assert waits(result)["line-big"] == waits(result)["mix-big"] == "cluster_room"
    assert waits(result)["line-small"] == "blocked_behind_head"
    assert "mix-small" in scheduled(result)  # greedy: skips the big one


def test_scale_up_places_on_a_new_node_within_max_nodes() -> None:
    # Issue 2: "the node pool it lands on and the node it fits on (an existing node with room,
    # or a new node within max scale)". Nodes 0-5 hold the sweep; the eval needs a 7th node.
    placed = scheduled(solve("seed-cli-queues"))
    [spot] = placed["nightly-eval"].containers
    assert spot.node in (6, 7) and spot.new_node
    assert all(
        not c.new_node for a in placed if a.startswith("sweep") for c in placed[a].containers
    )


def test_least_loaded_cluster_is_chosen() -> None:
    # "Among the clusters with room, it places the action on the least loaded one."
    assert scheduled(solve("least-loaded"))["job"].cluster == "west"


def test_seed_cli_queues_share_the_fleet() -> None:
    # "Give each team a queue and cap the CPU, memory, and GPUs that the queue's scheduled work
    # may use at once. Both teams then run on the same clusters, and neither can take all of
    # the capacity." The sweep asks for all 64 H100 but gets its 48; the nightly eval runs.
    result = solve("seed-cli-queues")
    assert charges(result, "research")[H100] == 48
    assert charges(result, "inference-eval")[H100] == 4


# -- infeasible requests and live cap changes -------------------------------------


def test_request_over_a_cap_fails_infeasible_without_blocking_the_line() -> None:
    # "A task can ask for more than its queue allows, for example 64 CPUs on a queue capped at
    # 32. Waiting would not help, so the action fails right away with the error code
    # INFEASIBLE and is not retried. The error message names the request and the cap."
    result = solve("infeasible-cpu-cap")
    code, message = failure(result, "big")
    assert code is INFEASIBLE
    assert "64" in message and "32" in message
    # "On a strict FIFO queue it would also block everything behind it. The scheduler fails
    # such an action as soon as it sees it." So small, behind it, runs.
    assert "small" in scheduled(result)
    assert not result.queues["capped"].head_blocked


@pytest.mark.parametrize(
    ("action", "named"),
    [
        # "It asks for an accelerator that none of those clusters has." (west has H100 but the
        # queue does not route there; east offers T4)
        ("wants-h100", ["h100", "t4"]),
        ("wants-tpu", ["v6e", "t4"]),
        # "One of its containers is larger than any node those clusters can launch."
        ("too-big-container", ["48", "32"]),
        # "Its total request is more than those clusters have at full scale." 3 x 24 = 72 CPUs
        # against 2 nodes of 32.
        ("too-big-total", ["72", "64"]),
    ],
)
def test_infeasible_against_the_clusters_names_request_and_offer(
    action: str, named: list[str]
) -> None:
    # "The error message names the request and what the queue or the clusters offer."
    code, message = failure(solve("infeasible-clusters"), action)
    assert code is INFEASIBLE
    for word in named:
        assert word in message.lower(), (word, message)


def test_lowering_a_cap_below_a_waiting_request_makes_it_infeasible() -> None:
    # "If you lower a cap below what a single waiting action asks for, that action becomes
    # infeasible and fails."
    result = solve("lowered-cap-below-request")
    code, message = failure(result, "wide")
    assert code is INFEASIBLE and "24" in message and "16" in message
    assert "narrow" in scheduled(result)  # 4 running + 8 = 12 <= 16


def test_lowering_a_cap_below_use_interrupts_nothing_and_admits_nothing_for_it() -> None:
    # "If you lower a cap below what is in use, running actions are not interrupted, and the
    # queue schedules nothing new for that resource until enough work finishes to bring usage
    # under the cap."
    result = solve("lowered-cap-below-use")
    assert result.failed == []
    assert result.queues["team"].in_flight_resources["memory"] == 96 * 2**30  # over 64Gi
    assert waits(result)["wants-memory"] == "queue_cap:memory"
    # cpu-only asks for no memory: nothing new for memory, so the memory cap does not hold it.
    assert "cpu-only" in scheduled(result)


def test_max_queued_time_and_deadline_fail_with_their_own_codes() -> None:
    # "set max_queued_time to fail fast when capacity isn't available within your window, and
    # deadline to put an absolute ceiling on total wall-clock including queue wait."
    result = solve("expiry")
    assert failure(result, "stale")[0] is ErrorCode.MAX_QUEUED_TIME_EXCEEDED
    assert failure(result, "late-abs")[0] is ErrorCode.DEADLINE_EXCEEDED
    assert failure(result, "late-rel")[0] is ErrorCode.DEADLINE_EXCEEDED  # 45m after 09:00
    # A failed head leaves the strict line: patient and fresh run behind it.
    assert {"patient", "fresh"} == set(scheduled(result))
    assert not result.queues["line"].head_blocked
