"""Idle timeouts of reusable environments (issue 14, part 4), through the service."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.service import Service

T4_CLUSTER: dict[str, Any] = {
    "name": "east",
    "node_pools": [
        {
            "name": "t4",
            "node": {"cpu": "32", "memory": "128Gi", "accelerator": "T4", "accelerators": 4},
            "nodes": 2,
        }
    ],
}
BIG = [{"resources": {"cpu": "8", "memory": "32Gi"}, "gpu": "T4:4"}]


@pytest.mark.service(cluster=T4_CLUSTER)
def test_a_strict_head_stalls_a_pool_past_its_idle_timeout(svc: Service) -> None:
    """Seed: "If the wait lasts longer than an environment's idle timeout, its containers shut
    down and the next action starts cold." Issue 14: "a pool with no live action for that long
    is stopped by the service (charges released, executor told); the next action starts it
    cold and must fit the caps again. Test the seed's story: a strict queue whose big head
    stalls a reusable environment past its idle timeout." """
    queue = {"name": "mixed-line", "max_accelerators": {"T4": 4}, "scheduling": "strict_fifo"}
    svc.ok("POST", "/queues", queue, status=201)
    embedder = {"queue": "mixed-line", "replicas": 2, "resources": {"cpu": "2", "memory": "8Gi"},
                "gpu": "T4:1", "idle_timeout": "30s"}  # fmt: skip
    assert svc.ok("PUT", "/environments/embedder", embedder, status=201)["idle_timeout"] == "30s"
    svc.ok("POST", "/actions", {"id": "embed-0", "queue": "mixed-line",
                                "environment": "embedder"}, 201)  # fmt: skip
    svc.tick()  # the pool starts: 2 of the queue's 4 T4s
    assert svc.ok("GET", "/environments/embedder")["running"]
    svc.ok("POST", "/actions/embed-0/report", {"outcome": "succeeded"})
    svc.ok("POST", "/actions", {"id": "big-job", "queue": "mixed-line", "containers": BIG}, 201)
    svc.ok("POST", "/actions", {"id": "embed-1", "queue": "mixed-line",
                                "environment": "embedder"}, 201)  # fmt: skip
    ticker = svc.app.state.ticker
    ticker.clock = lambda: datetime.now(UTC) + timedelta(seconds=25)
    svc.tick()
    assert svc.ok("GET", "/environments/embedder")["running"]  # idle, not for long enough
    assert svc.ok("GET", "/actions/big-job")["waiting_reason"] == "queue_cap"
    assert svc.ok("GET", "/actions/embed-1")["waiting_reason"] == "blocked_behind_head"

    ticker.clock = lambda: datetime.now(UTC) + timedelta(seconds=31)
    svc.tick()
    pool = svc.ok("GET", "/environments/embedder")
    assert (pool["running"], pool["placement"]) == (False, None)  # what executors see
    # Its 2 T4s were freed before this tick's snapshot: the head fits the cap of 4 now.
    assert svc.ok("GET", "/actions/big-job")["state"] == "scheduled"
    # The next action starts the pool cold, and that must fit the caps again: it waits.
    embed = svc.ok("GET", "/actions/embed-1")
    assert (embed["state"], embed["waiting_reason"]) == ("queued", "queue_cap")


def test_a_pool_without_idle_timeout_keeps_running(svc: Service) -> None:
    svc.ok("PUT", "/environments/warm", {"resources": {"cpu": "1", "memory": "1Gi"}}, status=201)
    svc.ok("POST", "/actions", {"id": "w", "environment": "warm"}, 201)
    svc.tick()
    svc.ok("POST", "/actions/w/report", {"outcome": "succeeded"})
    svc.app.state.ticker.clock = lambda: datetime.now(UTC) + timedelta(days=30)
    svc.tick()
    assert svc.ok("GET", "/environments/warm")["running"]
