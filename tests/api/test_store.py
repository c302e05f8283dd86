"""The store, on SQLite and on PostgreSQL: durable group commits, depth under concurrency,
one-transaction ticks, one writer per file, ticks refused when their snapshot was overtaken,
private files."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from api.store.records import Phase, ReportedOutcome, SnapshotOvertaken
from api.store.sql_store import SqlStore
from models.errors import FailedPrecondition, ResourceExhausted
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


def test_concurrent_submissions_share_commits_and_respect_depth(database: str) -> None:
    """Seed: "Depth: the total number of in-flight plus waiting items the queue will hold."
    Eight threads race 25 submissions each at a queue of depth 120: exactly 120 get in."""
    store = SqlStore(database)
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
    # What was acknowledged is stored: a store opened afresh reads it.
    reopened = SqlStore(database)
    assert reopened.queue_counts()["q"].queued == 120
    reopened.close()


def test_apply_tick_never_schedules_twice_nor_revives_a_cancelled_action(database: str) -> None:
    store = SqlStore(database)
    store.put_cluster(CLUSTER)
    store.submit([_action("a"), _action("b"), _action("c")])
    generation = store.read_tick_input(NOW).generation
    store.cancel_action("b", NOW)  # cancelled while the tick was solving
    applied = store.apply_tick(_result(scheduled=["a", "b"], failed=["c"]), generation)
    assert (applied.scheduled, applied.failed, applied.stale) == (1, 1, ["b"])
    store.report("a", ReportedOutcome.SUCCEEDED, NOW)
    # A stale replay of the same decision, at the store's current generation.
    again = store.apply_tick(_result(scheduled=["a"]), store.read_tick_input(NOW).generation)
    assert (again.scheduled, again.stale) == (0, ["a"])
    assert store.get_action("a").phase is Phase.SUCCEEDED
    assert store.get_action("b").phase is Phase.CANCELLED
    failed = store.get_action("c")
    assert (failed.phase, failed.code, failed.message) == (Phase.FAILED, "INFEASIBLE", "too big")


def test_a_tick_is_one_transaction(database: str) -> None:
    """Issue: a crash in the middle leaves either all of a tick's decisions or none."""
    store = SqlStore(database)
    store.put_cluster(CLUSTER)
    store.submit([_action("a"), _action("b")])
    generation = store.read_tick_input(NOW).generation
    result = _result(scheduled=["a", "b"])
    # A failure after the first decision: nothing of the tick may remain.
    result.scheduled[1].containers = None  # type: ignore[assignment]
    with pytest.raises(TypeError):
        store.apply_tick(result, generation)
    assert {store.get_action(a).phase for a in "ab"} == {Phase.QUEUED}


def test_snapshot_round_trips_through_the_solver(database: str) -> None:
    """Scheduled actions come back as running with their placement and keep their charges."""
    store = SqlStore(database)
    store.put_cluster(CLUSTER)
    store.create_queue(Queue(name="q", max_resources={"cpu": "4"}))
    store.submit([_action(f"a{i}", "q", cpu="2") for i in range(3)])
    planned = store.read_tick_input(NOW)
    first = tick(planned.snapshot)
    store.apply_tick(first, planned.generation)
    assert [s.action for s in first.scheduled] == ["a0", "a1"]
    snapshot = store.read_snapshot(NOW)
    running = [a for a in snapshot.actions if a.placement is not None]
    assert [a.id for a in running] == ["a0", "a1"]
    second = tick(snapshot)
    assert second.scheduled == [] and second.queues["q"].in_flight_resources["cpu"] == 4_000
    # The parsed-action cache changes nothing: a fresh store reads the same snapshot.
    store.close()
    assert SqlStore(database).read_snapshot(NOW) == snapshot


def _cpu_scheduled(store: SqlStore, queue: str) -> int:
    """Millicores held by the queue's scheduled actions (their containers' requests)."""
    return sum(
        record.action.containers[0].resources["cpu"]
        for record in store.list_actions(queue=queue, phase=Phase.SCHEDULED).items
    )


def test_a_tick_planned_on_an_overtaken_snapshot_is_refused(database: str) -> None:
    """Issue: "Write-back must also refuse to apply a tick planned from a snapshot that a
    newer write-back has overtaken (a generation number checked in the same transaction),
    so no interleaving can ever exceed a cap."

    Two ticks (two servers, say) read snapshots before either writes back. A submission
    between the reads makes them plan different admissions, each within the cap of 4
    cpu; applied together they would hold 6. The first applies (the submission did not
    overtake it), the second is refused whole."""
    store = SqlStore(database)
    store.put_cluster(CLUSTER)
    store.create_queue(Queue(name="q", max_resources={"cpu": "4"}))
    store.submit([_action("a0", "q", cpu="2"), _action("a1", "q", cpu="2")])
    first = store.read_tick_input(NOW)
    earlier = _action("b0", "q", cpu="2").model_copy(update={"submitted_at": NOW - timedelta(1)})
    store.submit([earlier])
    second = store.read_tick_input(NOW)
    first_plan, second_plan = tick(first.snapshot), tick(second.snapshot)
    assert [s.action for s in first_plan.scheduled] == ["a0", "a1"]
    assert [s.action for s in second_plan.scheduled] == ["b0", "a0"]

    assert store.apply_tick(first_plan, first.generation).scheduled == 2
    with pytest.raises(SnapshotOvertaken) as refused:
        store.apply_tick(second_plan, second.generation)
    assert refused.value.code.value == "FAILED_PRECONDITION"
    assert store.get_action("b0").phase is Phase.QUEUED
    assert _cpu_scheduled(store, "q") == 4000
    # Re-planned on a fresh snapshot, the next tick sees the cap full.
    fresh = store.read_tick_input(NOW)
    assert store.apply_tick(tick(fresh.snapshot), fresh.generation).scheduled == 0
    assert _cpu_scheduled(store, "q") == 4000


def test_a_lowered_cap_overtakes_a_tick_but_work_writes_do_not(database: str) -> None:
    """Issue: "... so no interleaving can ever exceed a cap." A cap lowered while a tick
    solves would let its admissions exceed the new cap: the write-back is refused. A
    submission, a cancellation or an executor's report cannot make the plan overrun
    anything, so they leave the tick valid."""
    store = SqlStore(database)
    store.put_cluster(CLUSTER)
    store.create_queue(Queue(name="q", max_resources={"cpu": "4"}))
    store.submit([_action(f"a{i}", "q", cpu="2") for i in range(4)])
    planned = store.read_tick_input(NOW)
    store.update_queue("q", {"max_resources": {"cpu": "2"}})
    with pytest.raises(SnapshotOvertaken):
        store.apply_tick(tick(planned.snapshot), planned.generation)
    assert _cpu_scheduled(store, "q") == 0

    planned = store.read_tick_input(NOW)
    store.submit([_action("late", "q", cpu="2")])
    store.cancel_action("a3", NOW)
    applied = store.apply_tick(tick(planned.snapshot), planned.generation)
    assert applied.scheduled == 1 and _cpu_scheduled(store, "q") == 2000
    planned = store.read_tick_input(NOW)
    store.report("a0", ReportedOutcome.STARTED, NOW)
    store.report("a0", ReportedOutcome.SUCCEEDED, NOW)
    assert store.apply_tick(tick(planned.snapshot), planned.generation).scheduled == 0


def test_a_second_writer_on_the_same_file_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """Issue: "A second server on the same file must refuse to start (an exclusive lock held
    for the process's life, released by the OS on kill -9), with a message saying which
    process holds it." """
    path = tmp_path / "s.db"
    store = SqlStore(path)
    with pytest.raises(FailedPrecondition) as refused:
        SqlStore(path)
    assert f"pid {os.getpid()}" in refused.value.message
    assert str(path) in refused.value.message
    store.close()
    SqlStore(path).close()  # closing releases the lock


def test_the_database_and_its_wal_shm_and_lock_files_are_private(tmp_path: Path) -> None:
    """Issue: "The database, WAL and SHM files are created 0644: create them 0600." """
    path = tmp_path / "s.db"
    previous = os.umask(0o022)  # the usual umask, which left the files readable by all
    store = SqlStore(path)
    try:
        store.submit([_action("a")])  # a write: SQLite has created the WAL and SHM files
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        modes = {file.name: stat.S_IMODE(file.stat().st_mode) for file in files}
        assert modes == {file.name: 0o600 for file in files}
        # The writer's lock file (it holds only a pid) is created the same way.
        assert stat.S_IMODE(Path(f"{path}.lock").stat().st_mode) == 0o600
    finally:
        store.close()
        os.umask(previous)
