"""Issue 15 part 2 in the service: forecasts of when waiting actions start, once per tick.

The small east fleet has 16 H100s; `fill-0` and `fill-1` take 8 each. The service ticks
every hour (tests.support.service), so simulated ticks fall on that grid.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from models.forecast import FinishedRun
from tests.support.service import Service


def _submit(svc: Service, action_id: str, gpu: str, **extra: Any) -> None:
    container = {"resources": {"cpu": "1", "memory": "1Gi"}, "gpu": gpu}
    body = {"id": action_id, "queue": "research", "containers": [container], **extra}
    svc.ok("POST", "/actions", body, 201)


def _cli(svc: Service, *args: str) -> str:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=svc.client()))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_waiting_action_shows_its_estimated_start_and_assumption(svc: Service) -> None:
    """ "`GET /actions/{id}` (and `sluice get action`, `sluice explain`) of a waiting action
    gives an estimated start time and the assumption behind it ... It says "unknown" rather
    than guess when running work has no expected end."

    fill-0 is expected to run 2h and fill-1 has no expected end: wait-0 starts at the first
    hourly tick after fill-0 ends; wait-1 needs the GPUs of fill-1 or of wait-0 (which has no
    expected run time either), so it is unknown."""
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    _submit(svc, "fill-0", "H100:8", expected_duration="2h")
    _submit(svc, "fill-1", "H100:8")
    svc.tick()
    _submit(svc, "wait-0", "H100:8")
    _submit(svc, "wait-1", "H100:8")
    svc.tick()
    placed = datetime.fromisoformat(svc.ok("GET", "/actions/fill-0")["scheduled_at"])
    first = svc.ok("GET", "/actions/wait-0")
    start = datetime.fromisoformat(first["estimated_start"])
    assert placed + timedelta(hours=2) <= start <= placed + timedelta(hours=3)
    assert first["estimate_assumption"].startswith("starts once fill-0 end")
    assert "no expected end (fill-1) are assumed to keep running" in first["estimate_assumption"]
    second = svc.ok("GET", "/actions/wait-1")
    assert second["estimated_start"] is None
    assert second["estimate_assumption"] == (
        "unknown: still waiting once every running action with an expected end has ended;"
        " it waits on work with no expected end (fill-1, wait-0)"
    )
    assert svc.ok("GET", "/actions/fill-0")["estimated_start"] is None  # not waiting
    assert svc.ok("GET", "/actions/fill-0")["expected_duration"] == "2h"
    assert "estimated start: unknown: still waiting" in _cli(svc, "get", "action", "wait-1")
    explanation = svc.ok("GET", "/actions/wait-0/explanation")
    assert explanation["estimated_start"] == first["estimated_start"]
    assert f"estimated start: {first['estimated_start']} (starts once fill-0" in _cli(
        svc, "explain", "wait-0"
    )


def test_submit_takes_an_expected_duration_and_bounds_it(svc: Service) -> None:
    """ "`expected_duration` on actions (submission field, validated and bounded ...
    CLI `sluice submit --expected-duration`)"."""
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    (action_id,) = _cli(
        svc, "submit", "--queue", "research", "--gpu", "H100:1", "--expected-duration", "90m"
    ).split()
    assert svc.ok("GET", f"/actions/{action_id}")["expected_duration"] == "1h30m"
    for bad in ("0s", "400d", "soon"):
        body = {"queue": "research", "containers": [{}], "expected_duration": bad}
        status, error = svc.error("POST", "/actions", body)
        assert (status, error["code"]) == (400, "INVALID_ARGUMENT"), bad
        assert "expected_duration" in error["message"]


def test_run_times_are_learned_from_finished_work(svc: Service) -> None:
    """ "learned per task or queue from finished work when the submitter gives none": the
    store hands forecasts each queue's succeeded runs, with their task."""
    svc.ok("POST", "/queues", {"name": "research"}, status=201)
    svc.ok("POST", "/tasks", {"name": "train", "queue": "research", "containers": [{}]}, 201)
    svc.ok("POST", "/actions", {"id": "t-1", "task": "train"}, 201)
    _submit(svc, "plain", "H100:1")
    svc.tick()
    for action_id in ("t-1", "plain"):
        svc.ok("POST", f"/actions/{action_id}/report", {"outcome": "started"})
        svc.ok("POST", f"/actions/{action_id}/report", {"outcome": "succeeded"})
    runs = svc.app.state.store.finished_runs()
    assert [(run.queue, run.task) for run in runs] == [("research", None), ("research", "train")]
    assert all(isinstance(run, FinishedRun) and run.seconds > 0 for run in runs)
