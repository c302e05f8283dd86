"""Two replicas on one PostgreSQL database, in-process with manual ticks: what the leader's
tick shows (blocked heads' explanations, start forecasts, deadline failures), the follower
shows too, read from the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.client import Queue
from tests.support.postgres import fresh_schema
from tests.support.service import Service, service


def _submit(svc: Service, action_id: str, queue: str, **fields: object) -> None:
    container = {"resources": {"cpu": "1", "memory": "1Gi"}} | fields.pop("container", {})
    body = {"id": action_id, "queue": queue, "containers": [container], **fields}
    svc.ok("POST", "/actions", body, 201)


def test_a_follower_shows_what_the_leader_shows(postgres_database: str, tmp_path: Path) -> None:
    """Issue 13: "Every replica serves the whole API (submissions, reads, SSE watch,
    metrics)" and "Watchers on any replica see every tick (...; no replica-local state is
    authoritative)"; with the seed's 8-GPU example on a strict line: "Under strict FIFO the
    queue stays at 6 of 8 until 2 more GPUs free up." """
    database = fresh_schema(postgres_database)
    with (
        service(tmp_path, database=database) as leader,
        service(tmp_path, database=database, cluster=None) as follower,
    ):
        assert leader.ok("GET", "/healthz")["leading"]
        assert not follower.ok("GET", "/healthz")["leading"]
        gang = {"name": "gang", "max_gpus": 8, "scheduling": "strict_fifo"}
        follower.ok("POST", "/queues", gang, status=201)  # writes go through any replica
        leader.ok("POST", "/queues", {"name": "one", "max_resources": {"cpu": "1"}}, status=201)
        _submit(leader, "g0", "gang", container={"gpu": "6"}, expected_duration="1h")
        _submit(follower, "late", "one", deadline="1h")
        leader.tick()
        for action_id, gpus in (("g1", "4"), ("g2", "1")):
            _submit(follower, action_id, "gang", container={"gpu": gpus})
        later = datetime.now(UTC) + timedelta(hours=1, seconds=1)
        leader.app.state.ticker.clock = lambda: later  # past late's deadline
        leader.tick()
        follower.tick()  # a follower's tick reads the leader's from the database

        shown = leader.ok("GET", "/queues/gang")
        assert shown["head_blocked"] and shown["head_explanation"]["action"] == "g1"
        assert follower.ok("GET", "/queues/gang") == shown
        waiting = leader.ok("GET", "/actions/g1")
        assert waiting["estimate_assumption"].startswith("starts once g0 end")
        assert follower.ok("GET", "/actions/g1") == waiting
        (event,) = Queue.watch("one", limit=1, client=follower.client())
        assert event["deadline_exceeded"] == ["late"]
        assert event == leader.ok("GET", "/queues/one")
        health = follower.ok("GET", "/healthz")
        assert health["last_tick"] == leader.ok("GET", "/healthz")["last_tick"]
