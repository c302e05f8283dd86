"""Retention of finished actions and jobs (issue 17): "Finished actions are never pruned: a
retention setting (age and count) with a background cleanup, and the Arrow export keeps what the
store keeps." Finished jobs of the job queues are pruned by the same settings."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import uvicorn
from click.testing import CliRunner

from api.cli.main import main
from api.metrics import QUEUE_WAIT_BOUNDS_S
from api.store.records import Retention
from api.store.sql_store import SqlStore
from models.arrow.tables import read_snapshot_stream
from models.quota import Job, JobQueue, SchedulingPolicy, ServiceEnvironment
from tests.support.metrics import samples
from tests.support.service import Service

ONE_CPU = [{"resources": {"cpu": "1", "memory": "1Gi"}}]
COUNTED = ("sluice_actions_submitted_total", "sluice_actions_scheduled_total",
           "sluice_actions_failed_total", "sluice_queue_wait_seconds_bucket",
           "sluice_queue_wait_seconds_count", "sluice_queue_wait_seconds_sum")  # fmt: skip


def _finish(svc: Service, outcomes: dict[str, str], live: tuple[str, ...] = ()) -> None:
    """Submit one action per id into queue q, tick, report each outcome in order; `live`
    ones stay running."""
    svc.ok("POST", "/queues", {"name": "q"}, status=201)
    for action_id in (*outcomes, *live):
        svc.ok("POST", "/actions", {"id": action_id, "queue": "q", "containers": ONE_CPU}, 201)
    svc.tick()
    for action_id in live:
        svc.ok("POST", f"/actions/{action_id}/report", {"outcome": "started"})
    for action_id, outcome in outcomes.items():
        if outcome == "cancelled":
            svc.ok("POST", f"/actions/{action_id}/cancel")
            continue
        body = {"outcome": outcome} | ({"code": "INTERNAL"} if outcome == "failed" else {})
        svc.ok("POST", f"/actions/{action_id}/report", body)


def _counted(svc: Service) -> dict[tuple[str, tuple[tuple[str, str], ...]], object]:
    """What /metrics counts from the store for queue q, by sample name and labels (the sum of
    waits to a few milliseconds: the store reads times to about one)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): pytest.approx(s.value, abs=0.01)
        if s.name.endswith("_sum")
        else s.value
        for s in samples(svc.http.get("/metrics").text)
        if s.name in COUNTED and s.labels.get("queue") == "q"
    }


def _ids(svc: Service) -> list[str]:
    return [action["id"] for action in svc.ok("GET", "/actions?queue=q&limit=100")]


def test_count_and_age_prune_the_oldest_finished_and_metrics_keep_counting(svc: Service) -> None:
    """A retention "(age and count)": the newest finished actions are kept up to the count,
    none older than the age; running ones are never pruned, and /metrics' counters do not go
    down (a dashboard's rate() would read a reset)."""
    _finish(svc, {"a1": "failed", "a2": "succeeded", "a3": "succeeded", "a4": "cancelled"},
            live=("a5",))  # fmt: skip
    store = svc.app.state.store
    before = _counted(svc)
    assert before[("sluice_actions_failed_total", (("code", "INTERNAL"), ("queue", "q")))] == 1
    now = datetime.now(UTC)
    assert store.prune_finished(now, Retention(None, 2), QUEUE_WAIT_BOUNDS_S) == 2
    assert _ids(svc) == ["a3", "a4", "a5"]
    status, error = svc.error("GET", "/actions/a1")
    assert (status, error["code"]) == (404, "NOT_FOUND")
    assert _counted(svc) == before
    # An hour on, the age bound takes the rest of the finished ones; a5 still runs.
    later = now + timedelta(hours=2)
    hour = Retention(timedelta(hours=1), None)
    assert store.prune_finished(later, hour, QUEUE_WAIT_BOUNDS_S) == 2
    assert _ids(svc) == ["a5"]
    assert _counted(svc) == before
    assert store.prune_finished(later, Retention(None, None), QUEUE_WAIT_BOUNDS_S) == 0
    # The Arrow export holds what the store holds.
    snapshot = read_snapshot_stream(svc.http.get("/snapshot").content)
    assert [action.id for action in snapshot.actions] == ["a5"]


G5 = "ml.g5.xlarge"


def _job_queue(svc: Service) -> None:
    """Job queue `training` with one share of one instance whose jobs preempt by priority."""
    policy = {"quota_share_policy": {"idle_resource_assignment_strategy": "FIFO"}}
    svc.ok("PUT", "/scheduling-policies/fifo", policy, status=201)
    svc.ok("PUT", "/service-environments/g5", {"capacity_limits": {G5: 3}}, status=201)
    share = {"name": "c", "capacity_limits": {G5: 1}, "strategy": "RESERVE",
             "in_share_preemption": True}  # fmt: skip
    queue = {"name": "training", "scheduling_policy": "fifo", "service_environment": "g5",
             "quota_shares": [share]}  # fmt: skip
    svc.ok("POST", "/job-queues", queue, status=201)


def _job(svc: Service, job_id: str, priority: int = 0) -> None:
    body = {"id": job_id, "job_queue": "training", "share": "c", "instance_type": G5}
    svc.ok("POST", "/jobs", body | {"priority": priority}, status=201)


def _finish_jobs(svc: Service) -> None:
    """low is preempted by high, then cancelled; high succeeds; run stays running."""
    _job_queue(svc)
    _job(svc, "low", priority=1)
    svc.tick()
    _job(svc, "high", priority=9)
    svc.tick()
    assert svc.ok("GET", "/jobs/low")["preemptions"] == 1
    svc.ok("POST", "/jobs/low/cancel")
    for outcome in ("started", "succeeded"):
        svc.ok("POST", "/jobs/high/report", {"outcome": outcome})
    _job(svc, "run")
    svc.tick()
    svc.ok("POST", "/jobs/run/report", {"outcome": "started"})


def _preemptions(svc: Service) -> dict[str, float]:
    metrics = samples(svc.http.get("/metrics").text)
    return {s.labels["job_queue"]: s.value for s in metrics if s.name == "sluice_preemptions_total"}


def _job_ids(svc: Service) -> list[str]:
    return [job["id"] for job in svc.ok("GET", "/jobs?job_queue=training")]


def test_finished_jobs_are_pruned_by_the_same_retention(svc: Service) -> None:
    """Jobs as actions: the newest finished ones up to the count, none older than the age;
    a running job is never pruned, and `sluice_preemptions_total` does not go down."""
    _finish_jobs(svc)
    store = svc.app.state.store
    assert (_job_ids(svc), _preemptions(svc)) == (["low", "high", "run"], {"training": 1})
    now = datetime.now(UTC)
    assert store.prune_finished_jobs(now, Retention(None, 1)) == 1
    assert _job_ids(svc) == ["high", "run"]
    assert svc.error("GET", "/jobs/low")[0] == 404
    assert _preemptions(svc) == {"training": 1}
    later = now + timedelta(hours=2)
    assert store.prune_finished_jobs(later, Retention(timedelta(hours=1), None)) == 1
    assert store.prune_finished_jobs(later, Retention(None, None)) == 0
    assert (_job_ids(svc), _preemptions(svc)) == (["run"], {"training": 1})
    # The pruned jobs' count is no capped queue's: no action metric appears for `training`.
    assert "training" not in {s.labels.get("queue") for s in samples(svc.http.get("/metrics").text)}
    snapshot = read_snapshot_stream(svc.http.get("/snapshot").content)
    assert [job.id for job in snapshot.jobs] == ["run"]


def test_job_pruning_runs_on_both_backends(database: str) -> None:
    """The same pruning of jobs in SQLite and PostgreSQL: oldest finished first, live jobs
    kept."""
    store = SqlStore(database)
    now = datetime.now(UTC)
    policy = {"name": "fifo", "quota_share_policy": {}}
    store.put_scheduling_policy(SchedulingPolicy.model_validate(policy))
    environment = {"name": "g5", "capacity_limits": {G5: 3}}
    store.put_service_environment(ServiceEnvironment.model_validate(environment))
    share = {"name": "c", "capacity_limits": {G5: 3}, "strategy": "RESERVE"}
    queue = {"name": "training", "scheduling_policy": "fifo", "service_environment": "g5",
             "quota_shares": [share]}  # fmt: skip
    store.create_job_queue(JobQueue.model_validate(queue))
    for index, job_id in enumerate(("j1", "j2", "j3")):
        job = {"id": job_id, "job_queue": "training", "share": "c", "instance_type": G5}
        store.submit_job(Job.model_validate(job | {"submitted_at": now}))
        if job_id != "j3":
            store.cancel_job(job_id, now + timedelta(seconds=index))
    assert store.prune_finished_jobs(now, Retention(None, 1)) == 1
    assert [record.job.id for record in store.list_jobs().items] == ["j2", "j3"]
    store.close()


@pytest.mark.service(retain_finished=1, retention_check_s=0.05)
def test_the_background_cleanup_prunes_while_the_service_runs(svc: Service) -> None:
    """ "with a background cleanup": no call needed, the service prunes on its own, finished
    actions and jobs alike."""
    _finish(svc, {"b1": "succeeded", "b2": "succeeded", "b3": "succeeded"})
    _finish_jobs(svc)
    deadline = time.monotonic() + 10
    while (_ids(svc), _job_ids(svc)) != (["b3"], ["high", "run"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (_ids(svc), _job_ids(svc)) == (["b3"], ["high", "run"])


def test_serve_takes_the_retention_from_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sluice serve --retain-for/--retain-finished`, with `forever` and `unlimited`, and from
    the environment; a bad value is INVALID_ARGUMENT before the server starts."""
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: None)
    help_text = CliRunner().invoke(main, ["serve", "--help"]).stdout
    assert "--retain-for" in help_text and "[default: 7d]" in help_text
    db = ["serve", "--db", str(tmp_path / "x.db")]
    result = CliRunner().invoke(main, db, env={"SLUICE_RETAIN_FINISHED": "500"})
    assert "retain_for=7d retain_finished=500" in result.stderr
    result = CliRunner().invoke(main, [*db, "--retain-for", "forever", "--retain-finished",
                                       "unlimited"])  # fmt: skip
    assert "retain_for=forever retain_finished=unlimited" in result.stderr
    for option, bad in (("--retain-for", "soon"), ("--retain-finished", "0")):
        result = CliRunner().invoke(main, [*db, option, bad])
        assert result.exit_code != 0
        assert "INVALID_ARGUMENT" in result.stderr, result.stderr
