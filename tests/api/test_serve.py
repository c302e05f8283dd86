"""`sluice serve` as an operator meets it: one server per database file, no open server
on a network address by accident, and a tick overtaken by a change re-planned."""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from api.cli.main import main
from api.cli.service import is_loopback, serve
from api.store.records import Phase
from models.result import TickResult
from models.snapshot import Action, Queue, Snapshot
from solver import tick
from tests.support.metrics import value
from tests.support.service import SLUICE, free_port, service, start_server


def _serve(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A `sluice serve` that is expected to stop by itself."""
    return subprocess.run(
        [SLUICE, "serve", "--db", str(db), "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_a_second_server_on_the_same_file_refuses_to_start(tmp_path: Path) -> None:
    """Issue: "A second server on the same file must refuse to start (an exclusive lock held
    for the process's life, released by the OS on kill -9), with a message saying which
    process holds it." """
    db = tmp_path / "one.db"
    first = start_server(db)
    try:
        # Issue: "Without `--auth` every caller is an admin and the only sign is a log line":
        # open on loopback, the banner says so too.
        assert "OPEN: no --auth, every caller is an admin" in first.log.read_text()
        second = _serve(db)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert lines[-1].startswith("FAILED_PRECONDITION: ")
        assert f"pid {first.process.pid}" in lines[-1] and str(db) in lines[-1]
        assert "Traceback" not in second.stderr
        assert httpx.get(f"{first.url}/healthz").status_code == 200  # the first one is untouched
        first.kill9()
        again = start_server(db)  # the OS released the lock with the killed process
        again.stop()
    finally:
        first.stop()


@pytest.mark.slow
def test_an_open_server_refuses_a_network_address(tmp_path: Path) -> None:
    """Issue: "Refuse to listen on a non-loopback address without an auth file unless
    `--insecure` is given; say so in the startup banner." """
    db = tmp_path / "open.db"
    refused = _serve(db, "--host", "0.0.0.0")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "INVALID_ARGUMENT: --host 0.0.0.0: without --auth every caller is an admin, so Sluice"
        " listens only on loopback (127.0.0.1, ::1, localhost); give --auth FILE, or"
        " --insecure to run open anyway"
    ]
    assert not db.exists()  # it stopped before opening the store, let alone the port

    server = start_server(db, extra=["--host", "0.0.0.0", "--insecure"])
    try:
        banner = server.log.read_text()
        assert "OPEN: no --auth, every caller is an admin" in banner
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("sluice.example.com", False),
    ],
)
def test_loopback_is_127_8_ipv6_one_and_localhost(host: str, loopback: bool) -> None:
    """Issue: "Refuse to listen on a non-loopback address without an auth file" (loopback:
    127.0.0.0/8, ::1, localhost; any other name may resolve to a network address)."""
    assert is_loopback(host) is loopback


def test_the_ticker_counts_an_overtaken_tick_and_replans(tmp_path: Path) -> None:
    """Issue: "Write-back must also refuse to apply a tick planned from a snapshot that a
    newer write-back has overtaken (a generation number checked in the same transaction),
    so no interleaving can ever exceed a cap."

    A cap lowered while a tick solves: that tick is not applied, it is counted (not a
    failure: the service stays healthy), and the next tick plans within the new cap."""
    lower_during_solve = threading.Event()

    def solve_while_the_cap_drops(snapshot: Snapshot) -> TickResult:
        result = tick(snapshot)
        if lower_during_solve.is_set():
            lower_during_solve.clear()
            svc.app.state.store.update_queue("q", {"max_resources": {"cpu": "2"}})
        return result

    with service(tmp_path, tick_fn=solve_while_the_cap_drops) as svc:
        store = svc.app.state.store
        store.create_queue(Queue(name="q", max_resources={"cpu": "4"}))
        store.submit(
            [
                Action(
                    id=f"a{i}",
                    queue="q",
                    submitted_at=datetime.now(UTC),
                    containers=[{"resources": {"cpu": "2", "memory": "1Gi"}}],
                )
                for i in range(2)
            ]
        )
        lower_during_solve.set()
        svc.tick()
        stats = svc.app.state.ticker.stats
        assert (stats.overtaken, stats.failures) == (1, 0)
        assert {store.get_action(a).phase for a in ("a0", "a1")} == {Phase.QUEUED}
        assert value(svc.http.get("/metrics").text, "sluice_ticks_overtaken_total") == 1
        assert svc.ok("GET", "/healthz")["status"] == "ok"
        svc.tick()
        assert [r.action.id for r in store.list_actions(phase=Phase.SCHEDULED).items] == ["a0"]


@pytest.mark.slow
def test_the_guard_and_stream_settings_are_options_of_serve(tmp_path: Path) -> None:
    """Issue: "reject bodies over a configurable limit (default 16 MiB) with 413"; "cap
    concurrent watchers (configurable), send keep-alive comments so proxies do not cut idle
    streams": `--max-body-bytes`, `--max-watchers` and `--watch-keepalive` set them."""
    server = start_server(
        tmp_path / "options.db",
        period_s=3600.0,  # no tick during the test: what reaches the stream is a keep-alive
        extra=["--max-body-bytes", "2048", "--max-watchers", "1", "--watch-keepalive", "1"],
    )
    try:
        refused = httpx.post(f"{server.url}/actions", content=b"x" * 4096)
        assert (refused.status_code, refused.json()["code"]) == (413, "REQUEST_TOO_LARGE")
        assert "2,048 bytes" in refused.json()["message"]
        with httpx.stream("GET", f"{server.url}/watch/queues", timeout=10) as stream:
            lines = stream.iter_lines()
            assert next(lines).startswith("event: queues")
            assert httpx.get(f"{server.url}/watch/queues").status_code == 429
            started = time.monotonic()
            assert ": keep-alive" in [next(lines) for _ in range(4)]
            assert time.monotonic() - started < 5
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("--max-body-bytes", "1023", "1024<=x<=1073741824"),
        ("--max-body-bytes", "1073741825", "1024<=x<=1073741824"),
        ("--max-watchers", "0", "1<=x<=1024"),
        ("--max-watchers", "1025", "1<=x<=1024"),
        ("--watch-keepalive", "0.5", "1.0<=x<=300.0"),
        ("--watch-keepalive", "inf", "1.0<=x<=300.0"),
        # nan compares false with both bounds: a plain FloatRange let it through, and
        # `--period nan` stopped with INTERNAL: ValidationError.
        ("--watch-keepalive", "nan", "'nan' is not a finite number"),
        ("--period", "nan", "'nan' is not a finite number"),
        ("--period", "inf", "'inf' is not a finite number"),
        ("--time-limit", "nan", "'nan' is not a finite number"),
    ],
)
def test_serve_options_out_of_their_bounds_are_refused(
    tmp_path: Path, option: str, value: str, allowed: str
) -> None:
    """Issue: "Bound every quantity, count and integer setting where it is parsed": out of
    range (or not a number at all), serve stops with a usage error naming the option before
    it opens the store, never INTERNAL."""
    db = tmp_path / "bounded.db"
    result = CliRunner().invoke(serve, ["--db", str(db), option, value])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and allowed in result.output
    assert not db.exists()


@pytest.mark.parametrize("database", ["mysql://root@127.0.0.1/test", "sqlite:///sluice.db"])
def test_a_database_url_sluice_does_not_run_on_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    """Issue 13: "`sluice serve --db postgresql://USER@HOST:PORT/DBNAME`"; SQLite is a file's
    path. Any other URL is refused by name, rather than becoming a file called `mysql:`."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["serve", "--db", database, "--port", str(free_port())])
    assert list(tmp_path.iterdir()) == []
    assert result.exit_code == 1
    scheme = database.split("://")[0]
    assert result.stderr.strip().splitlines()[-1] == (
        f"INVALID_ARGUMENT: database: {scheme}:// is not a database Sluice runs on; give a"
        " postgresql:// URL or a SQLite file's path"
    )
