"""/metrics through prometheus_client: what dashboards chart, and which counters survive a
restart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from api.metrics import tick_metric_families
from api.ticker import TickStats
from tests.support.metrics import families, samples, value
from tests.support.service import Service, service

QUEUE = {"name": "q", "scheduling": "strict_fifo", "depth": 3, "max_resources": {"cpu": "8"}}


def _action(action_id: str, cpu: str) -> dict[str, object]:
    return {"id": action_id, "queue": "q", "containers": [{"resources": {"cpu": cpu}}]}


def _fill(svc: Service) -> None:
    svc.ok("POST", "/queues", QUEUE, status=201)
    svc.ok("POST", "/actions", _action("small", "2"), status=201)
    svc.ok("POST", "/actions", _action("huge", "99"), status=201)  # never fits: INFEASIBLE
    svc.tick()
    svc.ok("POST", "/actions", _action("big", "7"), status=201)  # waits behind the cap
    svc.tick()


def test_dashboard_metrics(svc: Service) -> None:
    """Issue 17: "Add what dashboards need: `sluice_actions_submitted_total`,
    `_scheduled_total`, `_failed_total{code}` per queue; a histogram of queue wait seconds;
    a histogram of tick duration (not a gauge of the last tick); preemptions as a counter;
    `sluice_build_info`; head-blocked since as a timestamp.\""""
    _fill(svc)
    text = svc.http.get("/metrics").text
    assert value(text, "sluice_actions_submitted_total", queue="q") == 3
    assert value(text, "sluice_actions_scheduled_total", queue="q") == 1
    assert value(text, "sluice_actions_failed_total", queue="q", code="INFEASIBLE") == 1
    assert value(text, "sluice_queue_wait_seconds_count", queue="q") == 1
    assert value(text, "sluice_queue_wait_seconds_bucket", queue="q", le="+Inf") == 1
    kinds = families(text)
    assert (
        kinds["sluice_queue_wait_seconds"] == kinds["sluice_tick_duration_seconds"] == "histogram"
    )
    assert kinds["sluice_preemptions"] == "counter"
    assert kinds["sluice_build_info"] == "gauge"  # an info metric, in the text format
    build = [s for s in samples(text) if s.name == "sluice_build_info"]
    assert build[0].labels["version"] and build[0].value == 1
    ticks = value(text, "sluice_tick_duration_seconds_count")
    assert ticks is not None and ticks == value(text, "sluice_ticks_total")
    key = {"queue": "q", "pool": "default"}
    assert value(text, "sluice_queue_head_blocked", **key) == 1
    since = value(text, "sluice_queue_head_blocked_since_timestamp_seconds", **key)
    assert since is not None and abs(since - datetime.now(UTC).timestamp()) < 60
    assert value(text, "sluice_queue_depth_limit", **key) == 3
    assert any(s.name == "process_cpu_seconds_total" for s in samples(text))
    assert "python_info" in kinds


def test_store_counters_survive_a_restart(tmp_path: Path) -> None:
    """Issue 17 (brief): counters "survive restarts where they are derived from the store";
    the tick loop's are process counters and start again at 0."""
    with service(tmp_path) as svc:
        _fill(svc)
        before = svc.http.get("/metrics").text
    with service(tmp_path) as svc:
        after = svc.http.get("/metrics").text
    for name, labels in (
        ("sluice_actions_submitted_total", {"queue": "q"}),
        ("sluice_actions_scheduled_total", {"queue": "q"}),
        ("sluice_actions_failed_total", {"queue": "q", "code": "INFEASIBLE"}),
        ("sluice_queue_wait_seconds_sum", {"queue": "q"}),
    ):
        assert value(after, name, **labels) == value(before, name, **labels), name
    assert value(after, "sluice_ticks_total") == 1 < (value(before, "sluice_ticks_total") or 0)


def test_two_apps_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    """Each app has a registry of its own: a second app's metrics never collide with the
    first's (prometheus_client's global registry would refuse the second histogram)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with service(tmp_path / "a") as first, service(tmp_path / "b") as second:
        first.tick(3)
        counts = [
            value(app.http.get("/metrics").text, "sluice_tick_duration_seconds_count")
            for app in (first, second)
        ]
    assert counts == [4, 1]


def test_openmetrics_on_request(svc: Service) -> None:
    response = svc.http.get("/metrics", headers={"accept": "application/openmetrics-text"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")


def test_tick_metrics_from_stats_alone() -> None:
    """What a test of the tick loop's counters reads, without an app."""
    stats = TickStats(ticks=5, overtaken=3, last_error="RuntimeError: bug")
    values = {s.name: s.value for f in tick_metric_families(stats) for s in f.samples}
    assert values["sluice_ticks_total"] == 5 and values["sluice_ticks_overtaken_total"] == 3
    assert values["sluice_tick_failing"] == 1
    assert "sluice_last_tick_timestamp_seconds" not in values  # no tick written back yet
