"""Triggers (issue 14, part 1): scheduled runs sent to a queue, fired by the tick loop.

The firing rules are checked on the store with an injected clock and a fixed rate of a
second or two; the service's tick loop with its clock replaced; the HTTP API, the client
and the CLI in-process; a kill -9 of a real server for at-most-once across restarts.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from api.cli.context import Remote
from api.cli.main import main
from api.client import Action, Cron, FixedRate, Queue, SluiceClient, Trigger
from api.store.migrations import SCHEMA_VERSION
from api.store.sql_store import SqlStore
from models.errors import InvalidInput, NotFound, PermissionDenied
from models.snapshot import Queue as QueueModel
from models.triggers import Trigger as TriggerModel
from tests.api.test_role_matrix import AUTH, TOKENS
from tests.support.old_files import downgrade
from tests.support.service import Service, service, start_server

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = timedelta(seconds=2)
ONE_CPU = {"containers": [{"resources": {"cpu": "1", "memory": "1Gi"}}]}


def _trigger(**fields: Any) -> TriggerModel:
    data = {"name": "nightly", "schedule": {"every": "2s"}, "queue": "batch", "actions": [ONE_CPU]}
    return TriggerModel.model_validate(data | fields)


@pytest.fixture
def store(database: str) -> Iterator[SqlStore]:
    opened = SqlStore(database)
    opened.create_queue(QueueModel(name="batch"))
    try:
        yield opened
    finally:
        opened.close()


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_fixed_rate_fires_each_time_once(store: SqlStore) -> None:
    """Issue 14: "Each scheduled time fires at most once ... the firing and the run it
    creates commit in one transaction." Fixed rate `every 2s`, counted from creation."""
    store.create_trigger(_trigger(), T0)
    assert store.get_trigger("nightly").next_due == _at(2)
    assert store.fire_triggers(_at(1.9), GRACE) == []
    [first] = store.fire_triggers(_at(2.1), GRACE)
    assert (first.scheduled_for, first.outcome, first.run) == (_at(2), "fired", first.run)
    assert store.fire_triggers(_at(2.1), GRACE) == []  # the same time never again
    assert store.fire_triggers(_at(3.9), GRACE) == []
    [second] = store.fire_triggers(_at(4.0), GRACE)
    assert second.scheduled_for == _at(4) and second.run != first.run
    runs = {record.action.run for record in store.list_actions(queue="batch").items}
    assert runs == {first.run, second.run}
    record = store.get_trigger("nightly")
    assert [f.scheduled_for for f in record.history] == [_at(4), _at(2)]
    assert record.next_due == _at(6)


def test_each_firing_is_a_new_run_with_the_submit_fields(store: SqlStore) -> None:
    """Issue 14: "the action(s) each firing submits as a new run (the same fields as
    `sluice submit`)"; a deadline is counted from the firing."""
    two = [ONE_CPU | {"max_queued_time": "1h", "deadline": "6h"}, ONE_CPU]
    store.create_trigger(_trigger(actions=two), T0)
    [firing] = store.fire_triggers(_at(2), GRACE)
    actions = [record.action for record in store.list_actions(queue="batch").items]
    assert [a.run for a in actions] == [firing.run, firing.run]
    assert len({a.id for a in actions}) == 2
    assert actions[0].deadline_at() == _at(2 + 6 * 3600) and actions[0].submitted_at == _at(2)
    assert actions[0].max_queued_time == timedelta(hours=1)


def test_missed_times_get_one_catch_up_run_by_default(store: SqlStore) -> None:
    """Issue 14: "Fires missed while the service was down: one catch-up run by default ...;
    say which happened in the trigger's history." """
    store.create_trigger(_trigger(), T0)
    firings = store.fire_triggers(_at(30.5), GRACE)  # down from 0 to 30.5 s
    assert [(f.outcome, f.scheduled_for, f.missed) for f in firings] == [
        ("caught_up", _at(28), 14),  # 2, 4, ..., 28: more than 2 s old
        ("fired", _at(30), 0),
    ]
    assert "one catch-up run for 14 scheduled times" in firings[0].message
    assert len(store.list_actions(queue="batch").items) == 2
    assert store.get_trigger("nightly").next_due == _at(32)


def test_catch_up_none_skips_the_missed_times_and_says_so(store: SqlStore) -> None:
    """Issue 14: "... or none (`--catch-up none`); say which happened in the trigger's
    history." """
    store.create_trigger(_trigger(catch_up="none"), T0)
    firings = store.fire_triggers(_at(10), GRACE)  # 2, 4 and 6 are more than 2 s old
    assert [(f.outcome, f.scheduled_for, f.missed, f.run) for f in firings] == [
        ("skipped", _at(6), 3, None),
        ("fired", _at(8), 0, firings[1].run),
        ("fired", _at(10), 0, firings[2].run),
    ]
    assert "3 scheduled times passed while the service was down; catch_up none" in (
        firings[0].message
    )
    assert len(store.list_actions(queue="batch").items) == 2


def test_a_long_outage_of_a_fast_schedule_is_counted_within_bounds(store: SqlStore) -> None:
    """A year down with a one-second rate: the history says "more than 1000", one run."""
    store.create_trigger(_trigger(schedule={"every": "1s"}), T0)
    started = time.perf_counter()
    firings = store.fire_triggers(_at(365 * 86400), GRACE)
    assert time.perf_counter() - started < 1
    assert firings[0].outcome == "caught_up" and "more than 1000" in firings[0].message
    assert firings[0].scheduled_for == _at(365 * 86400 - 3)
    assert [f.scheduled_for for f in firings[1:]] == [_at(365 * 86400 - s) for s in (2, 1, 0)]


def test_paused_triggers_do_not_fire_and_resume_from_now(store: SqlStore) -> None:
    """Issue 14: a trigger is "paused or active"."""
    store.create_trigger(_trigger(paused=True), T0)
    assert store.get_trigger("nightly").next_due is None
    assert store.fire_triggers(_at(100), GRACE) == []
    resumed = _trigger(paused=False)
    assert store.replace_trigger(resumed, _at(101)).next_due == _at(102)
    assert [f.outcome for f in store.fire_triggers(_at(102), GRACE)] == ["fired"]


def test_a_refused_run_is_in_the_history(store: SqlStore) -> None:
    """A firing into a draining queue submits nothing; the history names the refusal."""
    store.create_trigger(_trigger(), T0)
    store.set_draining("batch", True)
    [refused] = store.fire_triggers(_at(2), GRACE)
    assert (refused.outcome, refused.run) == ("refused", None)
    assert refused.message.startswith("QUEUE_DRAINING: queue batch is draining")
    assert store.list_actions(queue="batch").items == []
    assert store.get_trigger("nightly").next_due == _at(4)


def test_cron_with_a_time_zone(store: SqlStore) -> None:
    """Issue 14: "schedule (cron expression with an optional time zone ...)"; croniter reads
    it. 02:00 in Amsterdam is 01:00 UTC in winter."""
    schedule = {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"}
    store.create_trigger(_trigger(schedule=schedule), T0)
    assert store.get_trigger("nightly").next_due == datetime(2026, 1, 1, 1, tzinfo=UTC)
    store.create_trigger(_trigger(name="utc", schedule={"cron": "0 2 * * *"}), T0)
    assert store.get_trigger("utc").next_due == datetime(2026, 1, 1, 2, tzinfo=UTC)


def test_bad_schedules_are_refused() -> None:
    for schedule, message in [
        ({"cron": "0 2 * *"}, "is not a cron expression"),
        ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "is not a time zone"),
        ({"every": "0.5s"}, "a fixed rate is at least 1 s"),
        ({"every": "1m", "cron": "* * * * *"}, "either a cron expression or a fixed rate"),
        ({}, "either a cron expression or a fixed rate"),
        ({"every": "1m", "timezone": "UTC"}, "only a cron schedule has a time zone"),
    ]:
        with pytest.raises(ValidationError, match=message):
            _trigger(schedule=schedule)
    with pytest.raises(ValidationError, match="needs containers or an environment"):
        _trigger(actions=[{}])


def test_an_existing_database_gains_the_triggers_tables(tmp_path: Path) -> None:
    """New tables through the store's schema versioning: a version 2 file is upgraded."""
    path = tmp_path / "old.db"
    SqlStore(path).close()
    downgrade(path, 2)
    upgraded = SqlStore(path)
    try:
        assert upgraded.list_triggers() == []
    finally:
        upgraded.close()
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    assert version == (str(SCHEMA_VERSION),)


# -- through the service's tick loop ----------------------------------------------------------


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def test_a_serialized_queue_holds_the_next_firing_until_the_previous_run_ends(
    svc: Service,
) -> None:
    """Issue 14: "With run_concurrency 1, a firing while the previous run is active waits in
    the queue (the seed's non-overlap), it is not dropped." Seed: "give the trigger a
    serialized queue (run_concurrency 1) and you get self-non-overlapping scheduled jobs for
    free." """
    store = svc.app.state.store
    store.create_queue(QueueModel(name="runs-1", run_concurrency=1))
    start = datetime.now(UTC) - timedelta(hours=1)  # the clock stays behind the tick's now
    clock = FakeClock(start)
    svc.app.state.ticker.clock = clock
    store.create_trigger(_trigger(queue="runs-1", schedule={"every": "1s"}), start)
    clock.now = start + timedelta(seconds=1)
    svc.tick()
    [first] = svc.ok("GET", "/actions?queue=runs-1")
    assert first["state"] == "scheduled"
    clock.now = start + timedelta(seconds=2)
    svc.tick()
    first, second = svc.ok("GET", "/actions?queue=runs-1")
    assert first["state"] == "scheduled"
    assert (second["state"], second["waiting_reason"]) == ("queued", "run_concurrency")
    assert second["run"] != first["run"]
    svc.ok("POST", f"/actions/{first['id']}/report", {"outcome": "succeeded"})
    svc.tick()
    assert svc.ok("GET", f"/actions/{second['id']}")["state"] == "scheduled"
    history = svc.ok("GET", "/triggers/nightly")["history"]
    assert [firing["outcome"] for firing in history] == ["fired", "fired"]


# -- HTTP, client and CLI ---------------------------------------------------------------------


def _cli(svc: Service, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), obj=Remote(connection=svc.client()))
    return result.exit_code, result.stdout, result.stderr


def test_the_seed_trigger_in_python(svc: Service) -> None:
    """Seed: `flyte.Trigger("nightly", flyte.Cron("0 2 * * *"), queue="batch")`; issue 14:
    "Python `Trigger("nightly", Cron("0 2 * * *"), queue="batch", ...)` and `FixedRate(...)`
    in the client, shaped like the seed." """
    client = svc.client()
    Queue.create("batch", client=client)
    created = Trigger("nightly", Cron("0 2 * * *"), queue="batch").create(client=client)
    assert (created["cron"], created["queue"], created["state"]) == ("0 2 * * *", "batch", "active")
    assert created["next_due"].endswith("T02:00:00Z")
    Trigger("poll", FixedRate("10m"), queue="batch", resources={"cpu": "2"}).create(client=client)
    poll = Trigger.get("poll", client=client)
    assert poll["every"] == "10m" and poll["actions"][0]["containers"][0]["resources"] == {
        "cpu": "2"
    }
    assert [t["name"] for t in Trigger.list(client=client)] == ["nightly", "poll"]
    changed = Trigger.update("nightly", schedule=Cron("30 3 * * *", "UTC"), client=client)
    assert changed["next_due"].endswith("T03:30:00Z")
    assert Trigger.pause("nightly", client=client)["state"] == "paused"
    assert Trigger.get("nightly", client=client)["next_due"] is None
    assert Trigger.resume("nightly", client=client)["state"] == "active"
    Trigger.delete("poll", client=client)
    with pytest.raises(NotFound):
        Trigger.get("poll", client=client)
    with pytest.raises(InvalidInput, match="cron: '0 2' is not a cron expression"):
        Trigger("bad", Cron("0 2"), queue="batch").create(client=client)


def test_trigger_cli_lines(svc: Service) -> None:
    """Issue 14: "`sluice create trigger nightly --cron "0 2 * * *" --queue batch [submit
    flags]`, `--every 10m` for a fixed rate; `get trigger(s)`, `update trigger`,
    `pause`/`resume`, `delete trigger`." """
    svc.ok("POST", "/queues", {"name": "batch"}, status=201)
    lines = [
        ["create", "trigger", "nightly", "--cron", "0 2 * * *", "--queue", "batch",
         "--resources", "cpu=4", "--gpu", "1", "--count", "2", "--deadline", "6h"],
        ["create", "trigger", "poll", "--every", "10m", "--queue", "batch",
         "--catch-up", "none"],
        ["get", "triggers"],
        ["get", "trigger", "nightly"],
        ["update", "trigger", "nightly", "--cron", "30 3 * * *", "--timezone", "Europe/Paris"],
        ["update", "trigger", "poll", "--every", "5m"],
        ["pause", "trigger", "nightly"],
        ["resume", "trigger", "nightly"],
        ["delete", "trigger", "poll"],
    ]  # fmt: skip
    outputs = []
    for line in lines:
        code, out, err = _cli(svc, *line)
        assert code == 0, (line, err)
        outputs.append(out)
    assert "trigger nightly: cron '0 2 * * *' (UTC) -> queue batch (active" in outputs[0]
    assert "each run: 2 action(s)" in outputs[0]
    assert "every 10m" in outputs[1] and "catch-up none" in outputs[1]
    assert outputs[2].splitlines()[0].split()[:3] == ["NAME", "SCHEDULE", "QUEUE"]
    assert "(Europe/Paris)" in outputs[4]
    nightly = svc.ok("GET", "/triggers/nightly")
    assert nightly["timezone"] == "Europe/Paris" and len(nightly["actions"]) == 2
    assert nightly["actions"][0]["deadline"] == "6h"
    assert [t["name"] for t in svc.ok("GET", "/triggers")] == ["nightly"]
    code, _, err = _cli(svc, "create", "trigger", "x", "--queue", "batch")
    assert code == 1 and err == "INVALID_ARGUMENT: give one of --cron or --every\n"
    code, _, err = _cli(svc, "create", "trigger", "x", "--cron", "61 * * * *", "--queue", "batch")
    assert code == 1 and "is not a cron expression" in err
    code, _, err = _cli(svc, "create", "trigger", "x", "--every", "1m", "--queue", "nope")
    assert code == 1 and err.startswith("NOT_FOUND: queue 'nope'")


def test_trigger_rights_follow_the_queue(tmp_path: Path) -> None:
    """Brief: "admin or submitter of the trigger's queue to create/update/delete, rights on
    the current queue and the new one when it moves"."""
    auth = tmp_path / "tokens.yaml"
    auth.write_text(AUTH)
    with service(tmp_path, auth_file=auth) as svc:

        def admin() -> SluiceClient:  # the clients share one TestClient, so its token
            return svc.client(TOKENS["admin"])

        def research() -> SluiceClient:
            return svc.client(TOKENS["own submitter"])

        for name in ("research", "inference-eval"):
            Queue.create(name, client=admin())
        Trigger("mine", FixedRate("1h"), queue="research").create(client=research())
        with pytest.raises(PermissionDenied, match="create triggers on queue inference-eval"):
            Trigger("theirs", FixedRate("1h"), queue="inference-eval").create(client=research())
        with pytest.raises(PermissionDenied, match="move trigger mine on queue inference-eval"):
            Trigger.update("mine", queue="inference-eval", client=research())
        moved = Trigger.update("mine", queue="inference-eval", client=admin())
        assert moved["queue"] == "inference-eval"
        with pytest.raises(PermissionDenied, match="change trigger mine, which is on queue"):
            Trigger.pause("mine", client=research())
        with pytest.raises(PermissionDenied, match="delete trigger mine, which is on queue"):
            Trigger.delete("mine", client=research())


# -- kill -9 ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_never_fires_a_scheduled_time_twice(tmp_path: Path) -> None:
    """Issue 14: "Each scheduled time fires at most once, across restarts (kill -9
    included) ...: the firing and the run it creates commit in one transaction." """
    db = tmp_path / "crash.db"
    server = start_server(db, period_s=0.1)
    try:
        client = SluiceClient(server.url)
        Queue.create("batch", client=client)
        Trigger("rate", FixedRate("1s"), queue="batch", resources={"cpu": "1"}).create(
            client=client
        )
        time.sleep(2.6)
        server.kill9()
    finally:
        server.stop()
    time.sleep(1.5)  # down: times pass while no server runs
    server = start_server(db, period_s=0.1)
    try:
        client = SluiceClient(server.url)
        time.sleep(2.6)
        # Paused, the trigger fires nothing between the two reads below (a firing between
        # them would add a run the history read before it does not show).
        Trigger.pause("rate", client=client)
        history = Trigger.get("rate", client=client)["history"]
        actions = Action.list(queue="batch", limit=10_000, client=client)
    finally:
        server.stop()
    times = [firing["scheduled_for"] for firing in history]
    assert len(times) == len(set(times)) and times == sorted(times, reverse=True)
    assert all(firing["outcome"] in ("fired", "caught_up") for firing in history), history
    assert "caught_up" in {firing["outcome"] for firing in history}  # the outage
    runs = [firing["run"] for firing in history]
    assert sorted(runs) == sorted(action["run"] for action in actions)
    assert len(set(runs)) == len(runs) >= 4
