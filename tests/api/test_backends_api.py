"""The HTTP API on both backends (the `database` fixture): submissions, queue caps and the
watch stream, and `sluice serve --demo` on PostgreSQL. On PostgreSQL two replicas share the
database, and each request goes to one or the other."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from api.client import Queue
from fixtures.service_fleets import EAST_SMALL
from tests.support.postgres import fresh_schema
from tests.support.service import Service, service, start_server

ONE_CPU = [{"resources": {"cpu": "1", "memory": "1Gi"}}]


@contextmanager
def _replicas(database: str, tmp_path: Path) -> Iterator[list[Service]]:
    """Two replicas on PostgreSQL, the first leading; one server on a SQLite file (one per
    file)."""
    count = 2 if database.startswith("postgresql://") else 1
    with ExitStack() as stack:
        yield [
            stack.enter_context(
                service(tmp_path, database=database, cluster=EAST_SMALL if index == 0 else None)
            )
            for index in range(count)
        ]


def test_an_id_already_stored_is_409_on_every_replica(database: str, tmp_path: Path) -> None:
    """Issue 13: "Submissions stay durable and idempotent on any replica: an id already
    stored is 409 on every replica"."""
    with _replicas(database, tmp_path) as replicas:
        replicas[0].ok("POST", "/actions", {"id": "once", "containers": ONE_CPU}, status=201)
        for replica in replicas:
            status, body = replica.error("POST", "/actions", {"id": "once", "containers": ONE_CPU})
            assert (status, body["code"]) == (409, "ALREADY_EXISTS")
            assert replica.ok("GET", "/actions/once")["state"] == "queued"


def test_a_queue_cap_holds_whichever_replica_takes_the_work(database: str, tmp_path: Path) -> None:
    """Seed (queues): a queue's resource caps bound what it runs at once: "max_resources";
    issue 13: "the same behaviour as SQLite in every test that does not name the backend"."""
    with _replicas(database, tmp_path) as replicas:
        leader, last = replicas[0], replicas[-1]
        last.ok("POST", "/queues", {"name": "two", "max_resources": {"cpu": "2"}}, status=201)
        for index in range(3):
            body = {"id": f"a{index}", "queue": "two", "containers": ONE_CPU}
            replicas[index % len(replicas)].ok("POST", "/actions", body, status=201)
        leader.tick()
        last.tick()  # a follower reads the leader's tick; a lone server just ticks again
        states = [last.ok("GET", f"/actions/a{index}")["state"] for index in range(3)]
        assert states == ["scheduled", "scheduled", "queued"]
        waiting = last.ok("GET", "/actions/a2")
        assert (waiting["waiting_reason"], waiting["waiting_resource"]) == ("queue_cap", "cpu")
        (event,) = Queue.watch("two", limit=1, client=last.client())
        assert event["in_flight_resources"]["cpu"] == "2"
        assert event == leader.ok("GET", "/queues/two")


def test_work_joins_a_running_pool_on_either_backend(database: str, tmp_path: Path) -> None:
    """Seed: a reusable environment's actions run in its pool's containers once it runs;
    the write-back of a tick whose action joins the pool checks the pool is up."""
    with _replicas(database, tmp_path) as replicas:
        leader, last = replicas[0], replicas[-1]
        pool = {"resources": {"cpu": "1", "memory": "1Gi"}}
        last.ok("PUT", "/environments/warm", pool, status=201)
        last.ok("POST", "/actions", {"id": "w1", "environment": "warm"}, 201)
        leader.tick()
        last.ok("POST", "/actions", {"id": "w2", "environment": "warm"}, 201)
        leader.tick()
        last.tick()
        assert last.ok("GET", "/environments/warm")["running"]
        assert [last.ok("GET", f"/actions/{a}")["state"] for a in ("w1", "w2")] == [
            "scheduled",
            "scheduled",
        ]


@pytest.mark.slow
def test_serve_demo_on_postgresql_ticks(postgres_database: str, tmp_path: Path) -> None:
    """Issue 13: "`sluice serve --demo` works on PostgreSQL too." """
    server = start_server(
        fresh_schema(postgres_database), period_s=0.5, extra=["--demo"], log_dir=tmp_path
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            health = httpx.get(f"{server.url}/healthz", timeout=5).json()
            moved = httpx.get(
                f"{server.url}/actions", params={"state": "succeeded", "limit": 1}, timeout=5
            ).json()
            if health["last_tick"] >= 3 and moved:
                break
            assert time.monotonic() < deadline, f"the demo did not move: {health}"
            time.sleep(0.2)
        assert health["leading"] and health["status"] == "ok"
        queues = {q["name"] for q in httpx.get(f"{server.url}/queues", timeout=5).json()}
        assert {"research", "inference-eval"} <= queues
    finally:
        server.stop()
