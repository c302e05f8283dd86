"""`sluice serve --demo`: the quota-shares part (the seed's job queue) loads idempotently,
and the demo executor's stream makes project-a borrow and project-b reclaim.

Issue "Quota shares": the seed's example, three shares of 1 ml.g5.xlarge (LEND_AND_BORROW,
LEND, RESERVE) in an environment of 3, shown to a newcomer in the running demo. The
executor is stepped on a simulated clock between manual ticks, so a few fast ticks cover
minutes of demo time and every run with one seed takes the same decisions.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from api.demo import (
    BORROWER,
    DEMO_JOB_QUEUE,
    DEMO_SERIAL_QUEUE,
    DEMO_TRIGGER,
    G5,
    LENDER,
    DemoExecutor,
    load_demo_fleet,
)
from api.store.records import JobPhase, JobRecord, Listing, Page
from models.quota_result import PreemptReason, QuotaTickResult
from tests.support.service import Service, service

# The demo puts its own fleet: the service starts without a cluster.
pytestmark = pytest.mark.service(cluster=None)

STEP_S = 5.0  # simulated seconds between executor steps, one tick after each
# project-b's first job is due 10-30 simulated s after the start and arrives at the first
# step after that where project-a borrows; project-a borrows from the first tick on and
# again one tick after a borrowed job ends, so a reclaim comes within 12 ticks.
FIRST_RECLAIM_WITHIN = 12


def _run(
    svc: Service, executor: DemoExecutor, ticks: int, clock: float = 0.0
) -> list[QuotaTickResult]:
    """Step the executor, then tick, `ticks` times; each tick's quota part, in order."""
    results: list[QuotaTickResult] = []
    for _ in range(ticks):
        executor.step(clock)
        svc.tick()
        result = svc.app.state.ticker.last_summary
        assert result is not None and result.quota is not None
        results.append(result.quota)
        clock += STEP_S
    return results


def _share_of(job_id: str) -> str:
    return {"a": "project-a", "b": "project-b", "c": "project-c"}[job_id.split("-")[0]]


def _plain(job_id: str) -> str:
    """A demo job id without its wall-clock part: `a-101500-3` -> `a-3`."""
    return re.sub(r"-\d{6}-", "-", job_id)


def test_demo_loads_the_seed_job_queue_idempotently(svc: Service) -> None:
    store = svc.app.state.store
    load_demo_fleet(store)
    load_demo_fleet(store)  # a restart on the same file keeps what is there
    assert [p["name"] for p in svc.ok("GET", "/scheduling-policies")] == ["quota-policy"]
    environments = svc.ok("GET", "/service-environments")
    assert [(e["name"], e["capacity_limits"]) for e in environments] == [("sagemaker-g5", {G5: 3})]
    queues = svc.ok("GET", "/job-queues")
    assert [q["name"] for q in queues] == [DEMO_JOB_QUEUE]
    queue = svc.ok("GET", f"/job-queues/{DEMO_JOB_QUEUE}")
    assert (queue["state"], queue["status"]) == ("ENABLED", "VALID")
    assert queue["max_capacity"] == {G5: 3}
    shares = [(s["name"], s["strategy"], s["capacity_limits"]) for s in queue["shares"]]
    assert shares == [
        ("project-a", "LEND_AND_BORROW", {G5: 1}),
        ("project-b", "LEND", {G5: 1}),
        ("project-c", "RESERVE", {G5: 1}),
    ]


@pytest.mark.slow
def test_demo_jobs_borrow_get_reclaimed_and_finish(svc: Service) -> None:
    store = svc.app.state.store
    load_demo_fleet(store)
    executor = DemoExecutor(store, seed=7)
    results = _run(svc, executor, FIRST_RECLAIM_WITHIN)
    reclaims = [stop for result in results for stop in result.preempted]
    assert reclaims, "no preemption within the bound"
    first = reclaims[0]
    # project-a was borrowing project-b's idle instance; a project-b job took it back.
    assert (first.share, first.reason) == (BORROWER, PreemptReason.RECLAIM)
    assert first.beneficiary is not None and _share_of(first.beneficiary) == LENDER
    assert store.get_job(first.job).preemptions >= 1

    # The preempted job is back in line; had the executor still reported it, the
    # service would refuse (409); it never did, and kept running the demo.
    results += _run(svc, executor, 24, clock=FIRST_RECLAIM_WITHIN * STEP_S)
    assert executor.preempted_seen >= 1
    scheduled = {start.job for result in results for start in result.scheduled}
    assert {_share_of(job) for job in scheduled} == {"project-a", "project-b", "project-c"}
    jobs = store.list_jobs(job_queue=DEMO_JOB_QUEUE, listing=Listing(limit=1000)).items
    done = [r for r in jobs if r.phase is JobPhase.SUCCEEDED]
    assert {r.job.share for r in done} >= {"project-a", "project-b"}
    assert all(r.started_at is not None and r.finished_at is not None for r in done)
    assert not [r for r in jobs if r.phase is JobPhase.FAILED]

    # Never more than the environment's 3 instances; project-a borrows, up to project-b's
    # one; project-c's RESERVE instance is never lent.
    borrowed = []
    for result in results:
        queue_usage = result.job_queues[DEMO_JOB_QUEUE]
        assert queue_usage.usage.get(G5, 0) <= 3
        shares = queue_usage.shares
        borrowed.append(shares[BORROWER].borrowed.get(G5, 0))
        assert shares["project-c"].lent.get(G5, 0) == 0
    assert max(borrowed) == 1

    queue = svc.ok("GET", f"/job-queues/{DEMO_JOB_QUEUE}")
    assert queue["status"] == "VALID"


def test_demo_executor_stops_a_job_preempted_while_it_reported(
    svc: Service, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The race: the executor listed a job RUNNING, the tick preempted it before the
    report. The report is refused (409 FAILED_PRECONDITION) and the executor carries on."""
    store = svc.app.state.store
    load_demo_fleet(store)
    executor = DemoExecutor(store, seed=7)
    for tick in range(FIRST_RECLAIM_WITHIN):
        (result,) = _run(svc, executor, 1, clock=tick * STEP_S)
        if result.preempted:
            break
    victim = result.preempted[0].job
    record = store.get_job(victim)
    assert record.phase is JobPhase.QUEUED and record.last_preemption is not None

    status, body = svc.error("POST", f"/jobs/{victim}/report", {"outcome": "succeeded"})
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")

    # What a list read just before the tick wrote would show: the job RUNNING, its run due.
    stale = replace(record, phase=JobPhase.RUNNING)
    listed = store.list_jobs

    def list_jobs(**filters: Any) -> Page[JobRecord]:
        found = listed(**filters)
        if filters.get("phase") is JobPhase.RUNNING:
            return Page([stale, *found.items], found.next_after)
        return found

    monkeypatch.setattr(store, "list_jobs", list_jobs)
    executor._job_finish_at[victim] = 0.0
    with caplog.at_level(logging.INFO, logger="sluice.demo"):
        executor.step(10_000.0)  # the refusal is handled: no error, and the job is stopped
    assert f"job {victim} stopped, not finished" in caplog.text
    monkeypatch.undo()
    assert victim not in executor._job_finish_at
    after = store.get_job(victim)
    assert (after.phase, after.finished_at) == (JobPhase.QUEUED, None)


@pytest.mark.slow
def test_demo_jobs_are_deterministic_from_the_seed(tmp_path: Path) -> None:
    def decisions(path: Path) -> list[tuple[list[str], list[str]]]:
        path.mkdir()
        with service(path, cluster=None) as svc:
            load_demo_fleet(svc.app.state.store)
            results = _run(svc, DemoExecutor(svc.app.state.store, seed=7), 20)
        return [
            ([_plain(s.job) for s in r.scheduled], [_plain(p.job) for p in r.preempted])
            for r in results
        ]

    assert decisions(tmp_path / "one") == decisions(tmp_path / "two")


def test_demo_trigger_fires_into_a_serialized_queue(svc: Service) -> None:
    """Issue 14: "the demo shows a trigger firing into a serialized queue." Seed: "give the
    trigger a serialized queue (run_concurrency 1) and you get self-non-overlapping scheduled
    jobs for free." """
    store = svc.app.state.store
    load_demo_fleet(store)
    load_demo_fleet(store)  # a restart keeps the trigger and its schedule
    trigger = store.get_trigger(DEMO_TRIGGER.name)
    queue = store.get_queue(DEMO_SERIAL_QUEUE.name)
    assert queue.queue.run_concurrency == 1 and trigger.trigger.queue == queue.queue.name
    ticker = svc.app.state.ticker
    for seconds in (10, 20):  # two firings, the first run still running at the second
        ticker.clock = lambda at=trigger.created_at + timedelta(seconds=seconds): at
        svc.tick()
    actions = store.list_actions(queue=DEMO_SERIAL_QUEUE.name).items
    first, second = sorted({record.action.run for record in actions})
    assert {r.phase.value for r in actions if r.action.run == first} == {"scheduled"}
    waiting = [svc.ok("GET", f"/actions/{r.action.id}") for r in actions if r.action.run == second]
    assert {(a["state"], a["waiting_reason"]) for a in waiting} == {("queued", "run_concurrency")}
