"""Three replicas on PostgreSQL against one server on SQLite, side by side: durable
submissions per second, and the time from a kill -9 to the next tick.

    .venv/bin/python -m bench.replicas [--seconds 10] [--concurrency 8] [--period 1]
        [--server postgresql://postgres@127.0.0.1:5432]

SQLite: one `sluice serve` on a fresh file; its failover is a restart on the same file (one
server per file). PostgreSQL: a database created for the run on `--server` (dropped after),
three replicas on it, the callers spread over them; its failover is another replica taking
the lease. Every acknowledged submission is durable on both (fsync on SQLite, COMMIT on
PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

from bench.service_load import start_server, submissions_per_second
from fixtures.service_fleets import EAST_LOAD, LOAD_QUEUES

Servers = list[tuple[subprocess.Popen[bytes], str]]


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """A new database on the PostgreSQL `server` (a URL without a database); its URL.
    Dropped afterwards, connections and all."""
    name = f"sluice_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _servers(db: str, count: int, period_s: float, log_dir: Path) -> Iterator[Servers]:
    servers = [start_server(db, period_s, log_dir) for _ in range(count)]
    try:
        url = servers[0][1]
        httpx.put(f"{url}/clusters/east", json=EAST_LOAD).raise_for_status()
        for queue in LOAD_QUEUES:
            httpx.post(f"{url}/queues", json=queue).raise_for_status()
        yield servers
    finally:
        for process, _ in servers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)


def _health(url: str) -> dict[str, object]:
    health: dict[str, object] = httpx.get(f"{url}/healthz", timeout=2).json()
    return health


def _last_tick(urls: list[str]) -> int:
    seen = 0
    for url in urls:
        try:
            seen = max(seen, int(str(_health(url)["last_tick"])))
        except httpx.HTTPError:
            continue
    return seen


def _until_next_tick(urls: list[str], before: int, started: float) -> float:
    while _last_tick(urls) <= before:
        if time.monotonic() - started > 60:
            raise SystemExit("no tick within 60 s of the kill")
        time.sleep(0.01)
    return time.monotonic() - started


def _failover(servers: Servers, restart: Callable[[int], None] | None) -> float:
    """kill -9 the leader; seconds until any server reports a newer tick. `restart` brings
    the killed server back on its port (SQLite: nobody else can take over)."""
    urls = [url for _, url in servers]
    leader = next(i for i, (_, url) in enumerate(servers) if _health(url)["leading"])
    before = _last_tick(urls)
    servers[leader][0].send_signal(signal.SIGKILL)
    started = time.monotonic()
    servers[leader][0].wait(timeout=10)
    if restart is not None:
        restart(leader)
    return _until_next_tick(urls, before, started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.server) as database:
        log_dir = Path(tmp)
        for backend, db, count in (
            ("SQLite", str(log_dir / "bench.db"), 1),
            ("PostgreSQL", database, 3),
        ):
            with _servers(db, count, args.period, log_dir) as servers:
                urls = [url for _, url in servers]
                rate = asyncio.run(submissions_per_second(urls, args.seconds, args.concurrency))

                def restart(index: int, servers: Servers = servers, db: str = db) -> None:
                    port = int(servers[index][1].rsplit(":", 1)[1])
                    servers[index] = start_server(db, args.period, log_dir, port)

                seconds = _failover(servers, restart if count == 1 else None)
            rows.append((backend, count, rate, seconds))
    print(
        f"durable single-action submissions, {args.concurrency} concurrent callers spread"
        f" over the servers, ticks every {args.period:g} s, {os.cpu_count()} cores shared"
        " with the load and the database:"
    )
    for backend, count, rate, seconds in rows:
        failover = "restart on the same file" if count == 1 else "another replica takes over"
        print(
            f"  {backend:<10} {count} server{'s' if count > 1 else ' '}: {rate:,.0f}/s;"
            f" kill -9 of the leader to the next tick {seconds:.2f} s ({failover})"
        )
    ratio = rows[1][2] / rows[0][2]
    print(f"  3 replicas on PostgreSQL / 1 on SQLite: {ratio:.2f}x the submissions/s")


if __name__ == "__main__":
    main()
