"""Deadlines while running (issue 14, part 3): at the deadline a scheduled or running action
fails DEADLINE_EXCEEDED, its charges are freed at once, and its executor is told to stop."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli.context import Remote
from api.cli.main import main
from api.client import Action, Queue
from api.demo import DemoExecutor, load_demo_fleet
from api.store.sql_store import SqlStore
from models.errors import DeadlineExceeded
from models.snapshot import Action as ActionModel
from tests.support.old_files import downgrade
from tests.support.service import Service

ONE_CPU = [{"resources": {"cpu": "1", "memory": "1Gi"}}]


def _at_clock(svc: Service, at: datetime) -> None:
    svc.app.state.ticker.clock = lambda: at


def test_a_running_action_fails_at_its_deadline_and_frees_its_charges(svc: Service) -> None:
    """Seed: deadline is "an absolute ceiling on total wall-clock including queue wait";
    issue 14: "At the deadline a scheduled or running action fails `DEADLINE_EXCEEDED`, its
    charges are released at once, and its executor is told to stop (the action's state ...
    say so; the executor acknowledges with a report)." """
    svc.ok("POST", "/queues", {"name": "one", "max_resources": {"cpu": "1"}}, status=201)
    for action_id, deadline in (("late", "1h"), ("next", None), ("also-late", "1h")):
        body = {"id": action_id, "queue": "one", "containers": ONE_CPU}
        svc.ok("POST", "/actions", body | ({"deadline": deadline} if deadline else {}), 201)
    svc.tick()
    assert svc.ok("GET", "/actions/late")["state"] == "scheduled"
    svc.ok("POST", "/actions/late/report", {"outcome": "started"})
    _at_clock(svc, datetime.now(UTC) + timedelta(minutes=59))
    svc.tick()
    assert svc.ok("GET", "/actions/late")["state"] == "running"  # not yet
    _at_clock(svc, datetime.now(UTC) + timedelta(hours=1, seconds=1))
    svc.tick()
    late = svc.ok("GET", "/actions/late")
    assert (late["state"], late["code"]) == ("failed", "DEADLINE_EXCEEDED")
    assert "passed while running; its executor must stop it" in late["message"]
    # Its cpu was freed before this tick's snapshot: the next in line got it at once.
    assert svc.ok("GET", "/actions/next")["state"] == "scheduled"
    with pytest.raises(DeadlineExceeded):
        Action.wait("late", client=svc.client())
    status, body = svc.error("POST", "/actions/late/report", {"outcome": "succeeded"})
    assert (status, body["code"]) == (409, "FAILED_PRECONDITION")
    assert "stop it and report failed to acknowledge" in body["message"]
    acknowledged = svc.ok("POST", "/actions/late/report", {"outcome": "failed"})
    assert (acknowledged["state"], acknowledged["code"]) == ("failed", "DEADLINE_EXCEEDED")


def test_the_watch_stream_says_a_running_action_failed_at_its_deadline(svc: Service) -> None:
    """Issue 14: "At the deadline a scheduled or running action fails `DEADLINE_EXCEEDED`, its
    charges are released at once, and its executor is told to stop (the action's state and the
    watch stream say so ...)"."""
    client = svc.client()
    svc.ok("POST", "/queues", {"name": "one", "max_resources": {"cpu": "1"}}, status=201)
    for action_id, deadline in (("late", {"deadline": "1h"}), ("next", {})):
        svc.ok("POST", "/actions", {"id": action_id, "queue": "one", "containers": ONE_CPU}
               | deadline, 201)  # fmt: skip
    svc.tick()
    svc.ok("POST", "/actions/late/report", {"outcome": "started"})
    _at_clock(svc, datetime.now(UTC) + timedelta(hours=1, seconds=1))
    svc.tick()
    (event,) = Queue.watch("one", limit=1, client=client)
    assert event["deadline_exceeded"] == ["late"]
    assert svc.ok("GET", "/actions/next")["state"] == "scheduled"  # on the freed cpu
    (table,) = Queue.watch_pool(limit=1, client=client)
    assert next(q for q in table if q["name"] == "one")["deadline_exceeded"] == ["late"]
    detail = CliRunner().invoke(main, ["get", "queue", "one"], obj=Remote(connection=client))
    assert "!! DEADLINE EXCEEDED at the last tick: late; their executors must stop them" in (
        detail.stdout
    )
    svc.tick()  # said once: the next tick has nothing to add
    (event,) = Queue.watch("one", limit=1, client=client)
    assert event["deadline_exceeded"] == []


def test_a_scheduled_action_not_yet_started_fails_too(svc: Service) -> None:
    """Issue 14: "a scheduled or running action fails `DEADLINE_EXCEEDED`"."""
    svc.ok("POST", "/actions", {"id": "s", "containers": ONE_CPU, "deadline": "30m"}, 201)
    svc.tick()
    assert svc.ok("GET", "/actions/s")["state"] == "scheduled"
    _at_clock(svc, datetime.now(UTC) + timedelta(hours=1))
    svc.tick()
    failed = svc.ok("GET", "/actions/s")
    assert (failed["state"], failed["code"]) == ("failed", "DEADLINE_EXCEEDED")
    assert "passed while scheduled" in failed["message"]


def test_the_demo_executor_honours_a_deadline(svc: Service) -> None:
    """Issue 14: "The demo executor honours it." """
    store = svc.app.state.store
    load_demo_fleet(store)  # the executor keeps its queues supplied
    executor = DemoExecutor(store, seed=7, step_s=0.1)
    svc.ok("POST", "/queues", {"name": "timed"}, status=201)
    svc.ok("POST", "/actions", {"id": "d", "queue": "timed", "containers": ONE_CPU,
                                "deadline": "10m"}, 201)  # fmt: skip
    svc.tick()
    executor.step(0.0)  # started, with a run time of 5-20 simulated seconds
    assert store.get_action("d").phase.value == "running"
    _at_clock(svc, datetime.now(UTC) + timedelta(minutes=11))
    svc.tick()
    executor.step(1.0)  # it sees the failure, stops the action and acknowledges
    assert executor.deadlines_stopped == 1
    executor.step(30.0)  # and never reports it done
    assert store.get_action("d").code is not None


def test_an_older_file_gains_the_deadline_column(tmp_path: Path) -> None:
    """Store schema 3 keeps each action's deadline as a time and each environment's idle
    timeout; an older file gains the columns, the deadlines filled in for its live actions."""
    path = tmp_path / "old.db"
    store = SqlStore(path)
    submitted = datetime(2026, 1, 1, tzinfo=UTC)
    store.submit([ActionModel.model_validate(
        {"id": "a", "submitted_at": submitted, "deadline": "1h", "containers": ONE_CPU}
    )])  # fmt: skip
    store.close()
    downgrade(path, 2)
    SqlStore(path).close()
    with sqlite3.connect(path) as conn:
        (deadline,) = conn.execute("SELECT deadline_at FROM actions").fetchone()
        columns = {row[1] for row in conn.execute("PRAGMA table_info(environments)")}
    assert "idle_timeout_s" in columns  # part 4's idle timeouts
    assert datetime.fromisoformat(deadline) == submitted + timedelta(hours=1)
