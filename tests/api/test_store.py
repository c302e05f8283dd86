"""The SQLite store: durable group commits, depth under concurrency, one-transaction ticks."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from api.store.sqlite import Outcome, Phase, SqliteStore
from models.errors import ResourceExhausted
from models.result import (
    FailedAction,
    PlacedContainer,
    ScheduledAction,
    SolverInfo,
    SolverStatus,
    TickResult,
)
from models.snapshot import Action, Cluster, Queue
from solver import tick

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
CLUSTER = Cluster.model_validate(
    {
        "name": "east",
        "node_pools": [{"name": "cpu", "node": {"cpu": "8", "memory": "32Gi"}, "nodes": 2}],
    }
)


def _action(action_id: str, queue: str = "default", cpu: str = "1") -> Action:
    return Action(
        id=action_id,
        queue=queue,
        submitted_at=NOW,
        containers=[{"resources": {"cpu": cpu, "memory": "1Gi"}}],
    )


def _result(scheduled: list[str] = (), failed: list[str] = ()) -> TickResult:  # type: ignore[assignment]
    return TickResult(
        now=NOW,
        scheduled=[
            ScheduledAction(
                action=a,
                queue="default",
                run=a,
                cluster="east",
                containers=[PlacedContainer(name="main", node_pool="cpu", node=0)],
            )
            for a in scheduled
        ],
        failed=[
            FailedAction(action=a, queue="default", code="INFEASIBLE", message="too big")
            for a in failed
        ],
        solver=SolverInfo(status=SolverStatus.GREEDY_EXACT, wall_time_s=0.0, limit_hit=False),
    )


def test_concurrent_submissions_share_commits_and_respect_depth(tmp_path: Path) -> None:
    """Seed: "Depth: the total number of in-flight plus waiting items the queue will hold."
    Eight threads race 25 submissions each at a queue of depth 120: exactly 120 get in."""
    store = SqliteStore(tmp_path / "s.db")
    store.create_queue(Queue(name="q", depth=120))
    accepted, rejected = [], []

    def submitter(worker: int) -> None:
        for index in range(25):
            try:
                store.submit([_action(f"w{worker}-{index}", "q")])
                accepted.append(1)
            except ResourceExhausted:
                rejected.append(1)

    threads = [threading.Thread(target=submitter, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(accepted), len(rejected)) == (120, 80)
    assert store.queue_counts()["q"].queued == 120
    store.close()
    # What was acknowledged is in the file, read by a fresh connection.
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM actions").fetchone() == (120,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_apply_tick_never_schedules_twice_nor_revives_a_cancelled_action(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.put_cluster(CLUSTER)
    store.submit([_action("a"), _action("b"), _action("c")])
    store.cancel_action("b", NOW)  # cancelled while the tick was solving
    applied = store.apply_tick(_result(scheduled=["a", "b"], failed=["c"]))
    assert (applied.scheduled, applied.failed, applied.stale) == (1, 1, ["b"])
    store.report("a", Outcome.SUCCEEDED, NOW)
    again = store.apply_tick(_result(scheduled=["a"]))  # a stale replay of the same decision
    assert (again.scheduled, again.stale) == (0, ["a"])
    assert store.get_action("a").phase is Phase.SUCCEEDED
    assert store.get_action("b").phase is Phase.CANCELLED
    failed = store.get_action("c")
    assert (failed.phase, failed.code, failed.message) == (Phase.FAILED, "INFEASIBLE", "too big")


def test_a_tick_is_one_transaction(tmp_path: Path) -> None:
    """Issue: a crash in the middle leaves either all of a tick's decisions or none."""
    store = SqliteStore(tmp_path / "s.db")
    store.put_cluster(CLUSTER)
    store.submit([_action("a"), _action("b")])
    result = _result(scheduled=["a", "b"])
    # A failure after the first decision: nothing of the tick may remain.
    result.scheduled[1].containers = None  # type: ignore[assignment]
    with pytest.raises(TypeError):
        store.apply_tick(result)
    assert {store.get_action(a).phase for a in "ab"} == {Phase.QUEUED}


def test_snapshot_round_trips_through_the_solver(tmp_path: Path) -> None:
    """Scheduled actions come back as running with their placement and keep their charges."""
    store = SqliteStore(tmp_path / "s.db")
    store.put_cluster(CLUSTER)
    store.create_queue(Queue(name="q", max_resources={"cpu": "4"}))
    store.submit([_action(f"a{i}", "q", cpu="2") for i in range(3)])
    first = tick(store.read_snapshot(NOW))
    store.apply_tick(first)
    assert [s.action for s in first.scheduled] == ["a0", "a1"]
    snapshot = store.read_snapshot(NOW)
    running = [a for a in snapshot.actions if a.placement is not None]
    assert [a.id for a in running] == ["a0", "a1"]
    second = tick(snapshot)
    assert second.scheduled == [] and second.queues["q"].in_flight_resources["cpu"] == 4_000
    # The parsed-action cache changes nothing: a fresh store reads the same snapshot.
    store.close()
    assert SqliteStore(tmp_path / "s.db").read_snapshot(NOW) == snapshot
