"""Retention of finished actions (issue 17): "Finished actions are never pruned: a retention
setting (age and count) with a background cleanup, and the Arrow export keeps what the store
keeps." """

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
from models.arrow.tables import read_snapshot_stream
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


@pytest.mark.service(retain_finished=1, retention_check_s=0.05)
def test_the_background_cleanup_prunes_while_the_service_runs(svc: Service) -> None:
    """ "with a background cleanup": no call needed, the service prunes on its own."""
    _finish(svc, {"b1": "succeeded", "b2": "succeeded", "b3": "succeeded"})
    deadline = time.monotonic() + 10
    while _ids(svc) != ["b3"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ids(svc) == ["b3"]


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
