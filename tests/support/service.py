"""Shared set-up for the tick service's tests: an in-process service with manual ticks,
and a real `sluice serve` process on a loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.app import create_app
from api.client import Action, SluiceClient
from api.config import ServiceSettings, TickWorker
from api.deps import MAX_PAGE
from api.tick_work import TickFn
from fixtures.service_fleets import EAST_SMALL
from models.snapshot import Cluster

SLUICE = str(Path(sys.executable).with_name("sluice"))


@dataclass
class Service:
    """An app running in-process. Its loop ticks once at start; `tick()` runs one more."""

    app: FastAPI
    http: TestClient

    def tick(self, times: int = 1) -> None:
        for _ in range(times):
            self.http.portal.call(self.app.state.ticker.run_once)

    def client(self, token: str | None = None) -> SluiceClient:
        return SluiceClient("http://testserver", token, http=self.http)

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        """A request that must succeed with `status`; returns the JSON body."""
        response = self.http.request(method, path, json=body)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def error(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        response = self.http.request(method, path, json=body)
        assert response.is_error, response.text
        return response.status_code, response.json()


@contextmanager
def service(
    tmp_path: Path,
    *,
    database: str | None = None,
    auth_file: Path | None = None,
    period_s: float = 3600.0,
    tick_fn: TickFn | None = None,
    cluster: dict[str, Any] | None = EAST_SMALL,
    tick_worker: TickWorker = TickWorker.THREAD,
    tick_timeout_s: float | None = None,
    **settings_fields: Any,
) -> Iterator[Service]:
    """In thread mode by default: a test's stand-in engine is often a closure, which cannot
    be sent to a worker process, and a worker costs seconds of start-up per test.
    `database`: a postgresql:// URL (the `database` fixture's; several services may share
    one, the first to start leads); by default a SQLite file in `tmp_path`.
    `settings_fields`: more of ServiceSettings (retain_finished=..., ...)."""
    settings = ServiceSettings(
        database=tmp_path / "sluice.db" if database is None else database,
        period_s=period_s,
        auth_file=auth_file,
        tick_worker=tick_worker,
        tick_timeout_s=tick_timeout_s,
        **settings_fields,
    )
    app = create_app(settings, tick_fn=tick_fn)
    with TestClient(app) as http:
        stats = app.state.ticker.stats
        # The loop's first tick at start-up, or on a follower the leader's it read.
        while stats.last_number + stats.failures == 0:
            time.sleep(0.01)
        if cluster is not None:
            app.state.store.put_cluster(Cluster.model_validate(cluster))
        yield Service(app, http)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """A real `sluice serve` process."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


def start_server(
    db: Path | str,
    *,
    period_s: float = 0.2,
    extra: list[str] | None = None,
    port: int | None = None,
    log_dir: Path | None = None,
) -> Server:
    """`db`: a SQLite file, or a postgresql:// URL (then give `log_dir`). `port`: a port a
    stopped server of the same test used (a client reconnecting to it). Returns once the
    server is ready (`/readyz`): its solver workers have started and it shows a tick."""
    port = port or free_port()
    log = (log_dir or Path(db).parent) / f"sluice.{port}.log"
    process = subprocess.Popen(
        [SLUICE, "serve", "--db", str(db), "--port", str(port), "--period", str(period_s)]
        + (extra or []),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    # Generous: on a loaded 2-core machine the imports and the two spawned solver workers
    # took over 30 s; a ready server returns at once.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sluice serve exited: {log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return Server(process, url, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"sluice serve did not get ready: {log.read_text()}")


def sluice(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the real `sluice` command against `url`."""
    done = subprocess.run(
        [SLUICE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SLUICE_URL": url},
        timeout=60,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def every_action(client: SluiceClient, **where: Any) -> list[dict[str, Any]]:
    """Every stored action the filter holds, page after page: a listing stops at the API's
    largest page (api.deps.MAX_PAGE), and a load test can store more than that."""
    actions: list[dict[str, Any]] = []
    token = None
    while True:
        page, token = Action.page(limit=MAX_PAGE, client=client, page_token=token, **where)
        actions.extend(page)
        if token is None:
            return actions
