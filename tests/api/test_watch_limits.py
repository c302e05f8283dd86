"""Server-sent event streams: a cap on how many are open, and keep-alive comments."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import uvicorn

from api.app import create_app
from api.config import ServiceSettings
from tests.support.service import free_port


@contextmanager
def _serving(tmp_path: Path, **settings: float) -> Iterator[str]:
    """The app on a loopback port (streams need a real connection), its address."""
    app = create_app(ServiceSettings(database=tmp_path / "s.db", period_s=3600.0, **settings))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def _first_event(response: httpx.Response) -> Iterator[str]:
    """The response's lines after its first event; dropping them closes the response."""
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("event:"):
            break
    return lines


def test_open_streams_are_capped_with_429(tmp_path: Path) -> None:
    """Issue: "SSE watchers share the tick's thread pool with no limit: cap concurrent
    watchers (configurable)" """
    with _serving(tmp_path, max_watchers=2) as url, httpx.Client(base_url=url) as http:
        with ExitStack() as streams:
            readers = []  # a reader dropped would close its stream
            for _ in range(2):
                response = streams.enter_context(http.stream("GET", "/watch/queues"))
                assert response.status_code == 200
                readers.append(_first_event(response))
            refused = http.get("/watch/queues/default")
            assert refused.status_code == 429
            body = refused.json()
            assert body["code"] == "RESOURCE_EXHAUSTED"
            assert "already streams to 2 watchers" in body["message"]
        # Closed streams give their slots back (once the server sees the disconnect).
        deadline = time.monotonic() + 10
        while (status := http.get("/watch/queues?limit=1").status_code) == 429:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert status == 200
        assert http.get("/watch/queues?limit=1").status_code == 200  # a finished one too


def test_an_idle_stream_gets_keep_alive_comments(tmp_path: Path) -> None:
    """Issue: "send keep-alive comments so proxies do not cut idle streams." """
    with _serving(tmp_path, watch_keepalive_s=0.05) as url, httpx.Client(base_url=url) as http:
        started = time.monotonic()
        with http.stream("GET", "/watch/queues/default") as response:
            lines = _first_event(response)
            comments = 0
            for line in lines:
                if line.startswith(":"):
                    assert line == ": keep-alive"
                    comments += 1
                    if comments == 3:
                        break
        assert time.monotonic() - started < 10
        assert ServiceSettings().watch_keepalive_s == 15.0
        assert ServiceSettings().max_watchers == 64
