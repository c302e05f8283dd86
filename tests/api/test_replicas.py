"""Three real `sluice serve` replicas on one PostgreSQL database: kill -9 the leader under
load, pause it past its lease, and check the promises of issue 13."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from api.client import Action, FleetConfig, Queue, SluiceClient
from fixtures.service_fleets import EAST_SMALL
from models.errors import AlreadyExists, SluiceError
from models.quantity import parse_quantity
from tests.support.postgres import fresh_schema
from tests.support.service import Server, every_action, start_server

PERIOD_S = 2.0  # long enough that a loaded machine's slow first tick still fits in two
CPU_CAP, H100_CAP = 48, 8  # the queue's caps: well under the fleet, so the caps bind
# cpu cores and H100s of each node, by node pool (tests/support EAST_SMALL)
NODE_ROOM = {
    pool["name"]: (int(pool["node"]["cpu"]) * 1000, pool["node"].get("accelerators", 0))
    for pool in EAST_SMALL["node_pools"]
}


def _health(server: Server) -> dict:
    return httpx.get(f"{server.url}/healthz", timeout=2).json()


def _leader(servers: list[Server]) -> Server:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for server in servers:
            try:
                if server.process.poll() is None and _health(server)["leading"]:
                    return server
            except httpx.HTTPError:
                pass
        time.sleep(0.05)
    raise AssertionError("no replica leads")


def _last_tick(servers: list[Server]) -> int:
    """The last tick any leader wrote back, as the live replicas report it."""
    seen = 0
    for server in servers:
        if server.process.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                seen = max(seen, _health(server)["last_tick"])
    return seen


@dataclass
class Load:
    """Submitters, an executor and a checker running against the replicas."""

    urls: list[str]
    database: str
    stop: threading.Event = field(default_factory=threading.Event)
    acknowledged: set[str] = field(default_factory=set)
    samples: int = 0
    over_cap: list[str] = field(default_factory=list)
    over_room: list[str] = field(default_factory=list)
    reported: int = 0
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self, submitters: int) -> None:
        self.threads = [
            threading.Thread(target=self._submit, args=(worker,)) for worker in range(submitters)
        ]
        self.threads += [
            threading.Thread(target=self._execute),
            threading.Thread(target=self._check),
        ]
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _clients(self, first: int) -> list[SluiceClient]:
        """One client per replica, starting at replica `first`: a submitter spreads over
        them and moves on to the next when its replica is down."""
        order = self.urls[first:] + self.urls[:first]
        return [SluiceClient(url, timeout_s=5) for url in order]

    def _submit(self, worker: int) -> None:
        clients, rng = self._clients(worker % len(self.urls)), random.Random(worker)
        for index in range(100_000):
            if self.stop.is_set():
                return
            action_id = f"w{worker}-{index}"
            gpu = f"H100:{rng.choice([1, 2])}" if rng.random() < 0.3 else None
            for attempt in range(len(clients) * 20):
                client = clients[attempt % len(clients)]
                try:
                    Action.submit(
                        queue="capped",
                        id=action_id,
                        resources={"cpu": str(rng.choice([1, 2, 4])), "memory": "1Gi"},
                        gpu=gpu,
                        client=client,
                    )
                    self.acknowledged.add(action_id)
                    break
                except AlreadyExists:
                    break  # a retry of a submission the dead replica had stored: not acknowledged
                except SluiceError:
                    time.sleep(0.05)  # that replica is down: the next one

    def _execute(self) -> None:
        """Starts and finishes about half of what is scheduled, so capacity churns."""
        clients, rng = self._clients(0), random.Random(99)
        turn = 0
        while not self.stop.is_set():
            client = clients[turn % len(clients)]
            try:
                for action in Action.list(state="scheduled", limit=500, client=client):
                    if rng.random() < 0.5:
                        Action.report(action["id"], "started", client=client)
                        Action.report(action["id"], "succeeded", client=client)
                        self.reported += 1
            except SluiceError:
                turn += 1
            time.sleep(0.05)

    def _check(self) -> None:
        """Every 100 ms, one consistent read of what is charged: the queue's caps and each
        node's room must hold."""
        with psycopg.connect(self.database, autocommit=True) as conn:
            while not self.stop.is_set():
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    rows = conn.execute(
                        "SELECT id, body, placement FROM actions"
                        " WHERE phase IN ('scheduled', 'running')"
                    ).fetchall()
                self._judge(rows)
                time.sleep(0.1)

    def _judge(self, rows: list[tuple[str, str, str | None]]) -> None:
        self.samples += 1
        cpu = gpus = 0
        nodes: Counter[tuple[str, int, str]] = Counter()
        for _, body, placement in rows:
            containers = {c["name"]: c for c in json.loads(body)["containers"]}
            for spot in json.loads(placement or "{}").get("containers", []):
                container = containers[spot["name"]]
                millicores = parse_quantity("cpu", container["resources"].get("cpu", "0"), "cpu")
                gpu = int(str(container["gpu"]).rsplit(":", 1)[1]) if container.get("gpu") else 0
                cpu, gpus = cpu + millicores, gpus + gpu
                nodes[(spot["node_pool"], spot["node"], "cpu")] += millicores
                nodes[(spot["node_pool"], spot["node"], "gpu")] += gpu
        if cpu > CPU_CAP * 1000 or gpus > H100_CAP:
            self.over_cap.append(f"sample {self.samples}: cpu {cpu} m, H100 {gpus}")
        for (pool, node, kind), used in nodes.items():
            room = NODE_ROOM[pool][0 if kind == "cpu" else 1]
            if used > room:
                self.over_room.append(f"sample {self.samples}: {pool}/{node} {kind} {used}")


def _put_fleet(server: Server) -> None:
    """The small east fleet and the capped queue the load submits to."""
    admin = SluiceClient(server.url)
    FleetConfig.put_cluster(EAST_SMALL, client=admin)
    Queue.create(
        "capped",
        max_resources={"cpu": str(CPU_CAP)},
        max_accelerators={"H100": H100_CAP},
        client=admin,
    )


def _replicas(database: str, log_dir: Path, ports: list[int] | None = None) -> list[Server]:
    return [
        start_server(database, period_s=PERIOD_S, log_dir=log_dir, port=port)
        for port in ports or [0, 0, 0]
    ]


def _failover(servers: list[Server]) -> float:
    """Seconds from the leader's death to the next tick another replica writes back."""
    before = _last_tick(servers)
    started = time.monotonic()
    while _last_tick(servers) <= before:
        assert time.monotonic() - started < 10 * PERIOD_S, "no replica took over"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.slow
def test_kill_9_the_leader_twice_under_load(postgres_database: str, tmp_path: Path) -> None:
    """Issue 13: "A fault test: 3 replicas on one database, 8 submitters spread across them,
    an executor reporting outcomes, a checker sampling caps and node room every 100 ms; kill
    -9 the leader twice during the load, restart it. Result: 0 acknowledged submissions
    lost, 0 duplicates, 0 samples over any cap or node room, ticks resume within two periods
    each time." """
    database = fresh_schema(postgres_database)
    servers = _replicas(database, tmp_path)
    load = Load([server.url for server in servers], database)
    try:
        _put_fleet(servers[0])
        load.start(submitters=8)
        failovers = []
        for _ in range(2):
            time.sleep(3 * PERIOD_S)
            leader = _leader(servers)
            port = int(leader.url.rsplit(":", 1)[1])
            leader.kill9()
            failovers.append(_failover(servers))
            # Restart the killed replica on its port: it rejoins as a follower.
            servers[servers.index(leader)] = start_server(
                database, period_s=PERIOD_S, log_dir=tmp_path, port=port
            )
        time.sleep(2 * PERIOD_S)
    finally:
        load.finish()
    try:
        client = SluiceClient(servers[0].url)
        stored = every_action(client)
        ids = Counter(action["id"] for action in stored)
        lost = load.acknowledged - set(ids)
        duplicates = [action_id for action_id, count in ids.items() if count > 1]
        print(
            f"\nreplicas 3, submitters 8, acknowledged {len(load.acknowledged)},"
            f" stored {len(ids)}, reported {load.reported}, lost {len(lost)},"
            f" duplicates {len(duplicates)}, checker samples {load.samples},"
            f" over cap {len(load.over_cap)}, over node room {len(load.over_room)},"
            f" failover {', '.join(f'{s:.2f} s' for s in failovers)}"
            f" (period {PERIOD_S:.1f} s)"
        )
        assert len(load.acknowledged) > 100, "the load never got going"
        assert load.samples > 50
        assert lost == set()
        assert duplicates == []
        assert load.over_cap == [] and load.over_room == []
        assert all(seconds <= 2 * PERIOD_S for seconds in failovers), failovers
    finally:
        for server in servers:
            server.stop()


def _metric(server: Server, name: str) -> float:
    for line in httpx.get(f"{server.url}/metrics", timeout=2).text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


@pytest.mark.slow
def test_a_leader_paused_past_its_lease_applies_nothing(
    postgres_database: str, tmp_path: Path
) -> None:
    """Issue 13: "Partition test: pause the leader (SIGSTOP) long enough for its lease to
    pass, let another replica tick, resume it: its stale write-back is refused and nothing
    is over-committed." """
    database = fresh_schema(postgres_database)
    servers = _replicas(database, tmp_path, ports=[0, 0])
    load = Load([server.url for server in servers], database)
    try:
        _put_fleet(servers[0])
        load.start(submitters=4)
        time.sleep(2 * PERIOD_S)
        paused = _leader(servers)
        other = servers[1 - servers.index(paused)]
        epoch = _health(paused)["epoch"]
        ticks = _metric(paused, "sluice_ticks_total")
        paused.process.send_signal(signal.SIGSTOP)
        try:
            before = _health(other)["last_tick"]
            deadline = time.monotonic() + 10 * PERIOD_S
            while not (_health(other)["leading"] and _health(other)["last_tick"] > before + 1):
                assert time.monotonic() < deadline, "the other replica never took over"
                time.sleep(0.05)
        finally:
            paused.process.send_signal(signal.SIGCONT)
        time.sleep(2 * PERIOD_S)
        health = _health(paused)
        fenced = _metric(paused, "sluice_ticks_fenced_total")
        written = _metric(paused, "sluice_ticks_total") - ticks
        print(
            f"\npaused leader (epoch {epoch}): after SIGCONT leading {health['leading']},"
            f" its write-backs refused {fenced:.0f}, written back at most {written:.0f}"
            f" (a tick it had finished before the pause); the other leads at epoch"
            f" {_health(other)['epoch']}; checker samples {load.samples},"
            f" over cap {len(load.over_cap)}, over node room {len(load.over_room)}"
        )
        assert not health["leading"]
        assert _health(other)["epoch"] > epoch
        assert written <= 1
        assert health["last_tick"] >= _health(other)["last_tick"] - 2  # it follows
    finally:
        load.finish()
        for server in servers:
            server.stop()
    assert load.over_cap == [] and load.over_room == []
