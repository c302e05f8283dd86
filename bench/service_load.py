"""Load on a real `sluice serve`: durable submissions per second, the tick time, and GET
latency during ticks against between them, with 10,000 actions queued.

    .venv/bin/python -m bench.service_load [--seconds 10] [--concurrency 8] [--queued 10000]
        [--tick-worker thread --tick-worker process] [--sluice PATH] [--no-ticks]
        [--no-access-log]

It starts its own server on a loopback port with a fresh SQLite file (WAL,
synchronous=FULL), so every acknowledged submission has been fsynced. Each --tick-worker
(by default: thread, then process) gets a server of its own in the same run, so the two
are measured side by side; `default` passes no flag (a build from before the option, given
with --sluice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from fixtures.service_fleets import EAST_LOAD, LOAD_QUEUES

SLUICE = str(Path(sys.executable).with_name("sluice"))
# A strict_fifo queue of the fill whose head waits: before the tick explained blocked heads,
# every GET of it solved.
POLLED = "/queues/gang"


@dataclass(frozen=True)
class Server:
    sluice: str  # the `sluice` executable
    tick_worker: str  # its --tick-worker, or "default" for none
    access_log: bool = True  # False: --no-access-log (a build from before the option has none)


DEFAULT_SERVER = Server(SLUICE, "default")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(
    db: str,
    period_s: float,
    log_dir: Path,
    port: int | None = None,
    server: Server = DEFAULT_SERVER,
) -> tuple[subprocess.Popen[bytes], str]:
    """`sluice serve` on `db` (a file or a postgresql:// URL); its process and URL."""
    port = port or _free_port()
    command = [server.sluice, "serve", "--db", db, "--port", str(port)]
    if server.tick_worker != "default":
        command += ["--tick-worker", server.tick_worker]
    if not server.access_log:
        command.append("--no-access-log")
    process = subprocess.Popen(
        [*command, "--period", str(period_s)],
        stdout=subprocess.DEVNULL,
        stderr=(log_dir / f"server.{port}.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("server did not start")


SUBMISSION = {"queue": "load", "containers": [{"resources": {"cpu": "1", "memory": "1Gi"}}]}


async def submissions_per_second(urls: list[str], seconds: float, concurrency: int) -> float:
    """Single-action POSTs from `concurrency` concurrent callers for `seconds`, the callers
    spread evenly over the servers at `urls`, each on a keep-alive connection of its own.

    The callers speak HTTP/1.1 on bare asyncio streams rather than through httpx: on the
    same two cores as the server, httpx's 2-3 ms of CPU per POST was more than the server's
    own, so the figure measured the load generator as much as the service."""
    body = json.dumps(SUBMISSION).encode()
    stop_at = time.perf_counter() + seconds

    async def caller(url: str) -> int:
        where = httpx.URL(url)
        host, port = where.host, where.port or 80
        reader, writer = await asyncio.open_connection(host, port)
        request = (
            f"POST /actions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        done = 0
        try:
            while time.perf_counter() < stop_at:
                writer.write(request)
                status = int((await reader.readline()).split()[1])
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                answer = await reader.readexactly(length)
                if status != 201:
                    raise SystemExit(f"POST /actions answered {status}: {answer.decode()}")
                done += 1
        finally:
            writer.close()
        return done

    started = time.perf_counter()
    done = await asyncio.gather(*(caller(urls[i % len(urls)]) for i in range(concurrency)))
    return sum(done) / (time.perf_counter() - started)


def fill_actions(count: int) -> Iterator[dict[str, Any]]:
    """`count` actions over the capped queues, most of which must wait, as submitted."""
    shapes = [
        ("research", {"cpu": "4", "memory": "16Gi"}, "H100:1"),
        ("research", {"cpu": "16", "memory": "128Gi"}, "H100:8"),
        ("inference-eval", {"cpu": "8", "memory": "32Gi"}, "H100:2"),
        ("gang", {"cpu": "48", "memory": "512Gi"}, "H100:8"),
    ]
    for index in range(count):
        queue, resources, gpu = shapes[index % len(shapes)]
        yield {
            "id": f"q-{index}",
            "queue": queue,
            "run": f"run-{index // 10}",
            "containers": [{"resources": resources, "gpu": gpu}],
        }


def _fill(url: str, count: int) -> None:
    """`count` queued actions over the capped queues, posted in batches of 1,000."""
    actions = list(fill_actions(count))
    for start in range(0, len(actions), 1000):
        httpx.post(
            f"{url}/actions/batch", json={"actions": actions[start : start + 1000]}, timeout=120
        ).raise_for_status()


def _tick_figures(url: str) -> dict[str, float]:
    """The last tick's time per phase and in all (/metrics keeps a histogram of every
    tick's duration, so the last tick's total is the sum of its phases). The forecast made
    after the write-back is no phase of the tick, and shows only once it is made, so a
    sample taken before it would have lacked the key others had."""
    text = httpx.get(f"{url}/metrics").text
    figures = {
        phase: float(seconds)
        for phase, seconds in re.findall(
            r'^sluice_tick_phase_seconds\{phase="(\w+)"\} (\S+)$', text, re.M
        )
        if phase != "forecast"
    }
    if not figures:
        raise SystemExit("/metrics has no sluice_tick_phase_seconds")
    return {"total": sum(figures.values()), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument(
        "--tick-worker",
        action="append",
        choices=["thread", "process", "default"],
        help="repeatable; default: thread, then process",
    )
    parser.add_argument("--sluice", default=SLUICE, help="the server's `sluice` executable")
    parser.add_argument(
        "--no-ticks",
        action="store_true",
        help="submissions alone: no tick after the fill (a period of a day), no GET phase",
    )
    parser.add_argument(
        "--no-access-log", action="store_true", help="serve without uvicorn's line per request"
    )
    args = parser.parse_args()
    for worker in args.tick_worker or ["thread", "process"]:
        print(f"--tick-worker {worker}{' --no-access-log' if args.no_access_log else ''}:")
        _measure(Server(args.sluice, worker, access_log=not args.no_access_log), args)


def _measure(server: Server, args: argparse.Namespace) -> None:
    period = 86_400.0 if args.no_ticks else args.period
    with (
        tempfile.TemporaryDirectory() as tmp,
        _server(Path(tmp) / "tick.db", period, server) as (url, pid),
    ):
        started = time.perf_counter()
        _fill(url, args.queued)
        filled = time.perf_counter() - started
        print(f"  batch submissions: {args.queued / filled:,.0f}/s (batches of 1,000)")
        if args.no_ticks:
            _submissions(url, pid, args.queued, args, "no tick after the fill")
            return
        _next_ticks(url, 1)  # the first may still be deciding the fill itself
        workers_before = _workers_cpu_seconds(pid)
        steady = _next_ticks(url, 4)
        workers_s = (_workers_cpu_seconds(pid) - workers_before) / len(steady)
        waiting = sum(q["waiting"] for q in httpx.get(f"{url}/queues").json())
        mean = {key: sum(s[key] for s in steady) / len(steady) for key in steady[0]}
        phases = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in mean.items() if k != "total")
        print(
            f"  tick with {waiting:,} of {args.queued:,} actions still waiting:"
            f" {mean['total'] * 1000:.0f} ms ({phases}), mean of {len(steady)} ticks;"
            f" CPU of the server's worker processes {workers_s * 1000:.0f} ms a tick"
        )
        ticks, api_s = _api_cpu_per_tick(url, pid, 4 * args.period)
        print(f"  API process CPU per tick with no requests: {api_s * 1000:.1f} ms ({ticks} ticks)")
        during, outside = asyncio.run(_get_latencies(url, args.seconds))
        p99_during, p99_outside = _p99(during), _p99(outside)
        print(
            f"  GET {POLLED} (blocked strict_fifo head), one caller, {args.seconds:g} s:"
            f" p99 {p99_during * 1000:.0f} ms during ticks ({len(during)} requests),"
            f" {p99_outside * 1000:.0f} ms outside ({len(outside)});"
            f" ratio {p99_during / p99_outside:.2f}x"
        )
        _submissions(url, pid, waiting, args, "ticks running")


def _api_cpu_per_tick(url: str, pid: int, seconds: float) -> tuple[int, float]:
    """The API process's CPU per tick over `seconds` in which nothing is asked of it: what
    ticking costs the process that serves requests."""
    before = httpx.get(f"{url}/healthz").json()["ticks"]
    cpu_before = _cpu_seconds(pid)
    time.sleep(seconds)
    cpu = _cpu_seconds(pid) - cpu_before
    ticks = httpx.get(f"{url}/healthz").json()["ticks"] - before
    return ticks, cpu / max(ticks, 1)


def _submissions(url: str, pid: int, waiting: int, args: argparse.Namespace, ticks: str) -> None:
    cpu_before, own_before = _cpu_seconds(pid), time.process_time()
    rate = asyncio.run(submissions_per_second([url], args.seconds, args.concurrency))
    submitted = rate * args.seconds
    server_ms = 1000 * (_cpu_seconds(pid) - cpu_before) / submitted
    client_ms = 1000 * (time.process_time() - own_before) / submitted
    print(
        f"  durable submissions with {waiting:,} queued: {rate:,.0f}/s sustained over"
        f" {args.seconds:g} s ({args.concurrency} concurrent callers, one action per"
        f" POST, {ticks}, SQLite WAL + synchronous=FULL, {os.cpu_count()} cores"
        f" shared with the load); API process CPU per submission {server_ms:.2f} ms"
        f" (the callers' {client_ms:.2f} ms); load average {os.getloadavg()[0]:.1f}"
    )


async def _get_latencies(url: str, seconds: float) -> tuple[list[float], list[float]]:
    """GETs of POLLED back to back for `seconds`, split by whether a tick was running when
    each was sent. Tick spans come from /healthz (end time and duration of the last tick),
    polled often enough to see every tick."""
    samples: list[tuple[float, float]] = []  # (sent at, Unix time; latency, s)
    ticks: dict[int, tuple[float, float]] = {}  # tick number: (start, end), Unix time
    stop_at = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:

        async def poll() -> None:
            while time.perf_counter() < stop_at:
                sent = time.time()
                started = time.perf_counter()
                (await client.get(POLLED)).raise_for_status()
                samples.append((sent, time.perf_counter() - started))

        async def watch_ticks() -> None:
            while time.perf_counter() < stop_at + 2 * seconds:
                health = (await client.get("/healthz")).json()
                if health["last_tick_at"]:
                    end = datetime.fromisoformat(health["last_tick_at"]).timestamp()
                    ticks[health["ticks"]] = (end - health["last_tick_s"], end)
                known = max((end for _, end in ticks.values()), default=0.0)
                if time.perf_counter() >= stop_at and samples and known >= samples[-1][0]:
                    return  # every tick that overlaps a sample is known
                await asyncio.sleep(0.1)

        await asyncio.gather(poll(), watch_ticks())
    spans = sorted(ticks.values())
    during = [latency for sent, latency in samples if _overlaps(sent, latency, spans)]
    outside = [latency for sent, latency in samples if not _overlaps(sent, latency, spans)]
    return during, outside


def _overlaps(sent: float, latency: float, spans: list[tuple[float, float]]) -> bool:
    return any(start < sent + latency and sent < end for start, end in spans)


def _p99(latencies: list[float]) -> float:
    if len(latencies) < 2:
        return math.nan
    return statistics.quantiles(latencies, n=100)[98]


def _next_ticks(url: str, count: int) -> list[dict[str, float]]:
    """The figures of the next `count` ticks."""
    ticks = httpx.get(f"{url}/healthz").json()["ticks"]
    samples: list[dict[str, float]] = []
    while len(samples) < count:
        now = httpx.get(f"{url}/healthz").json()["ticks"]
        if now > ticks:
            ticks = now
            samples.append(_tick_figures(url))
        time.sleep(0.05)
    return samples


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _workers_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the processes below `pid` (the tick's worker and any
    other the server started), from /proc: a tick's work that runs beside the server."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    below, found = {pid}, True
    while found:
        found = False
        for child, parent in parents.items():
            if parent in below and child not in below:
                below.add(child)
                found = True
    total = 0.0
    for child in below - {pid}:
        try:
            total += _cpu_seconds(child)
        except OSError:
            continue
    return total


@contextmanager
def _server(db: Path, period_s: float, server: Server) -> Iterator[tuple[str, int]]:
    """A fresh server with the bench fleet and queues: its URL and process id."""
    process, url = start_server(str(db), period_s, db.parent, server=server)
    try:
        httpx.put(f"{url}/clusters/east", json=EAST_LOAD).raise_for_status()
        for queue in LOAD_QUEUES:
            httpx.post(f"{url}/queues", json=queue).raise_for_status()
        yield url, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
