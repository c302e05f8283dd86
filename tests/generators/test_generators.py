"""Benchmark generators and the first-fit baseline (issue 7, "The benchmark").

Generators must give valid snapshots (running work inside its nodes' room and its
queues' caps), the same snapshot for the same seed, and the sizes the issue names;
the baseline must apply caps and concurrency like the engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.accounting import assess
from bench.baseline import first_fit
from bench.report import tables
from fixtures import SEEDS
from fixtures.fleets import Fleet, QueueLedger, demand_of, need_of
from fixtures.generators import write_scenario
from fixtures.generators.alibaba import STEADY_ARRIVALS, STEADY_FILL, TraceMissing, alibaba
from fixtures.generators.synthetic import M, Scale, fragmentation, synthetic
from models.scenario import load_scenario
from models.snapshot import ActionState, Scheduling, Snapshot

SMALL = Scale("small", pending=400, running=80, queues=8, clusters=3, pools=30)
SEEDS = SEEDS


def _replay_running(snapshot: Snapshot) -> tuple[Fleet, dict[str, QueueLedger], list[str]]:
    """Charge running work as placed; list every container on a pool that cannot take it."""
    fleet = Fleet(snapshot.clusters)
    ledgers = {q.name: QueueLedger(q) for q in snapshot.queues}
    wrong = []
    units = [
        (e.queue, e.placement, e.replica_containers())
        for e in snapshot.environments
        if e.running and e.placement is not None
    ] + [
        (a.queue, a.placement, a.containers)
        for a in snapshot.actions
        if a.state is ActionState.RUNNING and a.placement is not None
    ]
    for queue, placement, containers in units:
        needs = [need_of(c, snapshot.settings.default_gpu_type) for c in containers]
        for spot, need in zip(placement.containers, needs, strict=True):
            pool = fleet.pool(placement.cluster, spot.node_pool)
            if not pool.admits(need) or spot.node >= pool.up:
                wrong.append(f"{queue}: {spot}")
        spots = fleet.occupy(placement, needs)
        ledgers[queue].charge(demand_of(containers, needs), spots, needs)
    return fleet, ledgers, wrong


def _assert_running_is_valid(snapshot: Snapshot) -> None:
    fleet, ledgers, wrong = _replay_running(snapshot)
    assert wrong == []
    overfull = [(p.name, n) for p in fleet.all_pools() for n in range(p.size) if p.overfull(n)]
    assert overfull == []
    for ledger in ledgers.values():
        queue = ledger.queue
        for name, cap in queue.caps.items():
            assert ledger.held.amount(name) <= cap, (queue.name, name)


def test_synthetic_running_work_fits_its_nodes_and_caps() -> None:
    """Running actions must have valid placements that fit their nodes (the brief)."""
    _assert_running_is_valid(synthetic(SMALL, seed=3))


def test_synthetic_is_deterministic_per_seed() -> None:
    assert synthetic(SMALL, seed=3) == synthetic(SMALL, seed=3)
    assert synthetic(SMALL, seed=3) != synthetic(SMALL, seed=4)


@pytest.mark.slow
def test_m_has_the_size_and_mix_the_issue_names() -> None:
    """ "M (10,000 pending, 1,000 running, 50 queues, 10 clusters, 100 node pools) ...,
    mixing strict_fifo and greedy_capacity, typed and untyped GPUs, multi-container
    actions and reusable environments." """
    snapshot = synthetic(M)
    running = [a for a in snapshot.actions if a.state is ActionState.RUNNING]
    pending = [a for a in snapshot.actions if a.state is ActionState.QUEUED]
    assert (len(pending), len(running)) == (10_000, 1_000)
    assert len([q for q in snapshot.queues if q.name != "default"]) == 50
    assert len(snapshot.clusters) == 10
    assert sum(len(c.node_pools) for c in snapshot.clusters) == 100
    assert {q.scheduling for q in snapshot.queues} == set(Scheduling)
    gpus = [c.gpu for a in pending for c in a.containers if c.gpu is not None]
    assert any(g.device is None for g in gpus) and any(g.device is not None for g in gpus)
    assert any(len(a.containers) > 1 for a in pending)
    assert any(a.environment for a in pending) and any(a.environment for a in running)
    assert any(e.running for e in snapshot.environments)
    assert any(not e.running for e in snapshot.environments)
    _assert_running_is_valid(snapshot)


def test_fragmentation_first_fit_strands_the_large_containers() -> None:
    """ "multi-GPU containers (2, 4, 8 GPUs) against 8-GPU nodes that are partly full, where
    the order of placement decides how much fits." First fit spreads the 2-GPU work over
    the empty nodes, so no 8-GPU action fits; 320 GPUs are free and 352 asked for."""
    snapshot = fragmentation()
    _assert_running_is_valid(snapshot)
    pending = [a for a in snapshot.actions if a.state is ActionState.QUEUED]
    assert sum(a.containers[0].gpu.count for a in pending) == 352  # type: ignore[union-attr]
    assert assess(snapshot, [], []).gpu_allocation == pytest.approx(192 / 512)
    plan = first_fit(snapshot)
    outcome = assess(snapshot, plan.scheduled, plan.environments_started)
    assert (outcome.gpus, outcome.problems) == (224, [])
    assert not any(
        a.action.startswith("pending-") and _gpus(snapshot, a.action) == 8 for a in plan.scheduled
    )


def _gpus(snapshot: Snapshot, action_id: str) -> int:
    action = next(a for a in snapshot.actions if a.id == action_id)
    return sum(c.gpu.count for c in action.containers if c.gpu is not None)


@pytest.mark.parametrize(
    ("seed", "scheduled", "failed"),
    [
        # "Under greedy capacity the queue runs at 8 of 8 GPUs, and train starts once 4 GPUs
        # are free at the same moment."
        ("eight-gpu-greedy", {"evaluate", "embed"}, set()),
        # "Under strict FIFO the queue stays at 6 of 8 until 2 more GPUs free up."
        ("eight-gpu-strict", set(), set()),
        # "a cap of 3 lets at most three run concurrently and holds the rest until a slot frees up."
        ("action-concurrency", {"three-1", "three-2"}, set()),
        # "Children of an active run aren't capped by this; only the runs themselves are."
        ("run-concurrency", {"child-1", "child-2", "child-3", "idle-a1", "idle-a2"}, set()),
        # "higher priority work is scheduled ahead of lower priority work."
        ("priority", {"prod-1"}, set()),
        # "Later actions that join the running pool add nothing to the cap."
        ("warm-pool-start", {"embed-1", "embed-2", "embed-3"}, {"big-1"}),
        # "Depth: the total number of in-flight plus waiting items the queue will hold."
        ("depth", {"fill-1", "fill-2"}, set()),
        # "The scheduler fails such an action as soon as it sees it."
        ("infeasible-cpu-cap", {"small"}, {"big"}),
        ("lowered-cap-below-request", {"narrow"}, {"wide"}),
        (
            "infeasible-clusters",
            {"fits"},
            {"wants-h100", "wants-tpu", "too-big-container", "too-big-total"},
        ),
        # "A task that asks for T4s counts against the T4 cap only"
        ("t4-when-h100-capped", {"t4-work", "l4-work"}, set()),
        # "If you lower a cap below what is in use, running actions are not interrupted, and
        # the queue schedules nothing new for that resource"
        ("lowered-cap-below-use", {"cpu-only"}, set()),
        # "If it chooses a device that has its own cap, the request counts against that cap"
        ("l4-untyped", {"any-1"}, set()),
        ("org-default-gpu", {"any-2", "h100-1"}, set()),
        # "On a strict FIFO queue it blocks the line."
        ("cluster-full", {"mix-small"}, set()),
        ("gang-vs-stream-strict", set(), set()),
        ("expiry", {"fresh", "patient"}, {"stale", "late-abs", "late-rel"}),
    ],
)
def test_baseline_applies_caps_and_limits_like_the_spec(
    seed: str, scheduled: set[str], failed: set[str]
) -> None:
    """The seed examples whose answer needs no repacking: first fit must match them."""
    snapshot = load_scenario(SEEDS / f"{seed}.yaml")
    plan = first_fit(snapshot)
    assert {a.action for a in plan.scheduled} == scheduled
    assert set(plan.failed) == failed
    assert assess(snapshot, plan.scheduled, plan.environments_started).problems == []


def test_baseline_never_breaks_a_cap_or_a_node_on_a_generated_fleet() -> None:
    """ "An action is scheduled only when it fits under the queue's run concurrency, action
    concurrency, depth, and resource caps together." """
    snapshot = synthetic(SMALL, seed=5)
    plan = first_fit(snapshot)
    assert plan.scheduled
    assert assess(snapshot, plan.scheduled, plan.environments_started).problems == []


def test_a_scenario_file_loads_back_equal(tmp_path: Path) -> None:
    path = write_scenario("fragmentation", tmp_path / "fragmentation.yaml")
    assert load_scenario(path) == fragmentation()


def test_a_missing_trace_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The data folder may be absent: benchmarks and tests say so instead of crashing."""
    monkeypatch.setenv("SLUICE_DATA", str(tmp_path))
    with pytest.raises(TraceMissing, match="SLUICE_DATA"):
        alibaba("cold")
    text = tables([{"scenario": "alibaba-cold", "skipped": "FAILED_PRECONDITION: no trace"}])
    assert "alibaba-cold: FAILED_PRECONDITION: no trace" in text


def _trace(scenario: str) -> Snapshot:
    try:
        return alibaba(scenario)
    except TraceMissing as error:
        pytest.skip(f"Alibaba trace absent: {error.message}")


@pytest.mark.slow
def test_alibaba_cold_is_the_whole_trace_on_empty_nodes() -> None:
    """ "1,523 nodes with their CPU, memory, GPU count and GPU model, and 8,152 pods";
    "a cold start (the whole line against empty nodes)"."""
    snapshot = _trace("cold")
    pools = [p for c in snapshot.clusters for p in c.node_pools]
    assert len(snapshot.clusters) == 3
    assert sum(p.nodes for p in pools) == 1523
    assert sum(p.nodes * p.node.accelerators for p in pools) == 6212
    assert len(snapshot.actions) == 8152
    assert all(a.state is ActionState.QUEUED for a in snapshot.actions)
    gpus = [c.gpu for a in snapshot.actions for c in a.containers if c.gpu is not None]
    assert any(g.device is None for g in gpus) and any(g.device is not None for g in gpus)
    assert {q.scheduling for q in snapshot.queues} == set(Scheduling)


@pytest.mark.slow
def test_alibaba_steady_is_mostly_full_with_a_few_hundred_arriving() -> None:
    """ "a steady state (the fleet mostly full, a few hundred pods arriving)"."""
    snapshot = _trace("steady")
    _assert_running_is_valid(snapshot)
    assert sum(a.state is ActionState.QUEUED for a in snapshot.actions) == STEADY_ARRIVALS
    assert assess(snapshot, [], []).gpu_allocation >= STEADY_FILL
