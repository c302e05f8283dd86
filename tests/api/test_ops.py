"""Watch streams, /metrics, /healthz, the one error shape, and the tick loop's behaviour."""

from __future__ import annotations

import json
import logging
import time
from itertools import count
from pathlib import Path

import pytest

from api.leader import Leadership
from models.result import TickResult
from models.snapshot import Snapshot
from solver import tick
from tests.support.metrics import families, value
from tests.support.service import Service, service


def _events(text: str) -> list[tuple[str, object]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.mark.service(period_s=0.05)
def test_watch_one_queue_and_pools(svc: Service) -> None:
    """Seed: "Stream one queue" and "Stream every live queue in the given pools (all pools
    when omitted)"; one event per tick."""
    svc.ok("POST", "/queues", {"name": "research", "pool": "gpu-pool"}, status=201)
    svc.ok("POST", "/queues", {"name": "etl", "pool": "cpu-pool"}, status=201)
    events = _events(svc.http.get("/watch/queues/research?limit=3").text)
    assert [name for name, _ in events] == ["queue"] * 3
    assert all(data["name"] == "research" for _, data in events)  # type: ignore[index]

    events = _events(svc.http.get("/watch/queues?pool=gpu-pool&limit=2").text)
    assert [[q["name"] for q in data] for _, data in events] == [["research"]] * 2  # type: ignore[union-attr]
    events = _events(svc.http.get("/watch/queues?limit=1").text)
    assert [q["name"] for q in events[0][1]] == ["default", "etl", "research"]  # type: ignore[union-attr]
    assert svc.http.get("/watch/queues/nope").json()["code"] == "NOT_FOUND"


def test_metrics_in_prometheus_text(svc: Service) -> None:
    """Issue: /metrics in Prometheus text format (usage and cap per queue and resource,
    waiting and blocked counts, tick duration). Issue 17: "One unit per metric (cores,
    bytes, devices as separate metrics, not one metric with a `resource` label mixing
    units)"; "the metrics parse with prometheus_client's own parser in a test"."""
    queue = {
        "name": "q",
        "max_resources": {"cpu": "8", "memory": "4Ti"},
        "max_accelerators": {"H100": 8},
    }
    svc.ok("POST", "/queues", queue, status=201)
    job = {
        "id": "j",
        "queue": "q",
        "containers": [{"resources": {"cpu": "500m"}, "gpu": "H100:2"}],
    }
    svc.ok("POST", "/actions", job, status=201)
    svc.ok("POST", "/actions", job | {"id": "k", "containers": [{"gpu": "H100:8"}]}, 201)
    svc.tick()
    response = svc.http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    key = {"queue": "q", "pool": "default"}
    h100 = key | {"device": "nvidia_gpu/nvidia-h100"}
    for name, labels, expected in (
        ("sluice_queue_in_flight_cpu_cores", key, 0.5),
        ("sluice_queue_cap_cpu_cores", key, 8),
        ("sluice_queue_cap_bytes", key | {"resource": "memory"}, 4 * 2**40),
        ("sluice_queue_in_flight_devices", h100, 2),
        ("sluice_queue_cap_devices", h100, 8),
        ("sluice_queue_waiting", key, 1),
        ("sluice_queue_head_blocked", key, 0),
        ("sluice_queues_blocked", {}, 0),
    ):
        assert value(text, name, **labels) == expected, name
    assert families(text)["sluice_tick_duration_seconds"] == "histogram"
    assert (value(text, "sluice_ticks_total") or 0) >= 1


@pytest.mark.service(cluster=None)
def test_metrics_count_past_a_million_exactly(svc: Service) -> None:
    """Issue 17: "A counter past 1,000,000 stops visibly counting (1,234,567 and 1,234,568
    both print `1.23457e+06`)"."""
    svc.app.state.ticker.stats.overtaken = 1_234_567
    assert "sluice_ticks_overtaken_total 1.234567e+06" in svc.http.get("/metrics").text
    svc.app.state.ticker.stats.overtaken += 1
    assert value(svc.http.get("/metrics").text, "sluice_ticks_overtaken_total") == 1_234_568


@pytest.mark.service(cluster=None)
def test_every_error_has_the_same_shape(svc: Service) -> None:
    assert svc.error("GET", "/no/such/thing") == (
        404,
        {"code": "NOT_FOUND", "message": "no such endpoint: GET /no/such/thing (see /docs)"},
    )
    status, body = svc.error("DELETE", "/actions")
    assert (status, body["code"]) == (405, "INVALID_ARGUMENT")
    status, body = svc.error("GET", "/actions?limit=0")
    assert (status, body["field"]) == (400, "query.limit")
    response = svc.http.post(
        "/queues", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["code"] == "INVALID_ARGUMENT"
    assert svc.http.get("/docs").status_code == 200
    assert "/queues/{name}" in svc.http.get("/openapi.json").json()["paths"]


@pytest.mark.service(cluster=None)
def test_a_method_the_path_does_not_allow_names_those_it_does(svc: Service) -> None:
    """A 405 carries `Allow` (RFC 9110: "The origin server MUST generate an Allow header field
    in a 405 response"); the error handler dropped the header Starlette sets (found by the
    schemathesis run, tests/api/test_fuzz_schema.py)."""
    response = svc.http.request("TRACE", "/queues")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, POST"  # one route per method in FastAPI
    response = svc.http.delete("/actions")
    assert response.headers["allow"] == "GET, HEAD, POST"
    response = svc.http.put("/queues/research")
    assert response.headers["allow"] == "DELETE, GET, HEAD, PATCH"
    # The literal template wins over one with a parameter, as in the document.
    assert svc.http.put("/actions/batch").headers["allow"] == "POST"
    assert response.json()["code"] == "INVALID_ARGUMENT"


def test_a_failing_tick_is_logged_and_the_loop_goes_on(tmp_path: Path) -> None:
    calls = {"n": 0}

    def flaky(snapshot: Snapshot) -> TickResult:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("solver bug")
        return tick(snapshot)

    with service(tmp_path, tick_fn=flaky) as svc:
        svc.tick()
        health = svc.http.get("/healthz")
        assert health.status_code == 503
        assert health.json()["last_error"] == "RuntimeError: solver bug"
        svc.tick()
        health = svc.http.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"


def test_readyz_is_503_until_the_replica_shows_a_tick(tmp_path: Path) -> None:
    """Issue 13: "Every replica serves the whole API": a load balancer sends traffic to a
    replica once /readyz is 200, when its solver workers have started and it shows a tick."""
    calls = {"n": 0}

    def late(snapshot: Snapshot) -> TickResult:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("not yet")
        return tick(snapshot)

    # No cluster: defining one wakes the ticker, whose second tick could then come first.
    with service(tmp_path, tick_fn=late, cluster=None) as svc:  # its first tick failed
        ready = svc.http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"ready": False, "workers_ready": True, "last_tick": 0}
        svc.tick()
        ready = svc.http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "workers_ready": True, "last_tick": 1}


def test_an_overrunning_tick_is_logged_with_its_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue: A tick that overruns its period is logged with its time; ticks never overlap."""
    running = {"now": 0, "most": 0}

    def slow(snapshot: Snapshot) -> TickResult:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        time.sleep(0.08)
        running["now"] -= 1
        return tick(snapshot)

    with (
        caplog.at_level(logging.WARNING, logger="sluice.tick"),
        service(tmp_path, period_s=0.02, tick_fn=slow) as svc,
    ):
        deadline = time.monotonic() + 5
        while svc.app.state.ticker.stats.overruns < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert running["most"] == 1
    overruns = [r.getMessage() for r in caplog.records if "over its" in r.getMessage()]
    assert overruns and "over its 0.020 s period" in overruns[0]


def test_snapshot_endpoint_streams_the_tick_input_as_arrow(svc: Service) -> None:
    """Issue 4: produce a snapshot "from the running service (`GET /snapshot` as an Arrow IPC
    stream, and `sluice snapshot export`)"; reading it back gives the store's queues and line."""

    from models.arrow.tables import STREAM_MEDIA_TYPE, read_snapshot_stream

    svc.ok("POST", "/queues", {"name": "q", "max_resources": {"cpu": "8"}}, status=201)
    job = {"id": "j", "queue": "q", "containers": [{"resources": {"cpu": "500m"}}]}
    svc.ok("POST", "/actions", job, status=201)
    response = svc.http.get("/snapshot")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(STREAM_MEDIA_TYPE)
    snapshot = read_snapshot_stream(response.content)
    assert snapshot.queue("q").max_resources == {"cpu": 8000}
    assert [a.id for a in snapshot.actions] == ["j"]


def test_start_up_ticks_once_when_the_lease_renewal_comes_back_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 3: "One loop in the server runs the tick on a period (configurable, default a
    few seconds) ... ticks never overlap." One tick at start-up, the next a period later: the
    lease keeper's first renewal, slow on a loaded machine, comes back after the start-up
    tick at the epoch that tick was elected at; no new election, so no second tick."""
    holds = count(1)
    hold = Leadership.hold

    def second_late(leadership: Leadership) -> int | None:
        if next(holds) == 2:  # the keeper's, after the start-up tick's own
            time.sleep(0.5)
        return hold(leadership)

    monkeypatch.setattr(Leadership, "hold", second_late)
    ticks = count()

    def counted(snapshot: Snapshot) -> TickResult:
        next(ticks)
        return tick(snapshot)

    with service(tmp_path, tick_fn=counted):
        time.sleep(1.5)
        assert next(ticks) == 1
