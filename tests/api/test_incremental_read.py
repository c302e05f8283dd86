"""The tick's snapshot, read incrementally, is the snapshot a full read gives.

A store keeps the last read's live actions and reads only the rows written since
(api.store.tick_io.LiveActions). Random submissions, cancellations, ticks, executor
reports, moves, prunes and configuration changes run against one store; after each, the
reader that has read after every step and a new reader (which reads every row) must
produce the same snapshot, byte for byte, on both databases.
"""

from __future__ import annotations

import contextlib
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest

from api.store.records import ReportedOutcome, Retention
from api.store.sql_store import SqlStore
from api.store.tick_io import SqlTickIO
from models.errors import SluiceError
from models.snapshot import Action, Cluster, Queue, Snapshot
from solver import tick
from tests.support.old_files import downgrade
from tests.support.postgres import fresh_schema

START = datetime(2026, 12, 2, tzinfo=UTC)
CLUSTER = {
    "name": "east",
    "node_pools": [
        {
            "name": "gpu",
            "node": {"cpu": "32", "memory": "256Gi", "accelerator": "H100", "accelerators": 4},
            "nodes": 2,
        },
        {"name": "cpu", "node": {"cpu": "16", "memory": "64Gi"}, "nodes": 2},
    ],
}
QUEUES = ["default", "a", "b"]


def _action(serial: int, rng: random.Random) -> Action:
    gpu = rng.choice([None, "H100:1", "H100:2"])
    container: dict[str, object] = {"resources": {"cpu": str(rng.randint(1, 8)), "memory": "4Gi"}}
    if gpu:
        container["gpu"] = gpu
    return Action.model_validate(
        {
            "id": f"x-{serial}",
            "queue": rng.choice(QUEUES),
            "containers": [container],
            "submitted_at": START + timedelta(seconds=serial),
        }
    )


def _ids(store: SqlStore, phase: str) -> list[str]:
    with store._read() as conn:
        rows = conn.execute("SELECT id FROM actions WHERE phase = ? ORDER BY seq", (phase,))
        return [action_id for (action_id,) in rows.fetchall()]


def _step(store: SqlStore, rng: random.Random, serial: int, now: datetime) -> int:
    """One random change of the store; returns the next action serial."""
    kind = rng.choice(
        ["submit", "submit", "cancel", "tick", "tick", "report", "move", "prune", "configure"]
    )
    if kind == "submit":
        count = rng.randint(1, 12)
        store.submit([_action(serial + i, rng) for i in range(count)])
        return serial + count
    if kind == "tick":
        planned = store.read_tick_input(now)
        store.apply_tick(tick(planned.snapshot), planned.generation)
    elif kind == "cancel":
        live = _ids(store, "queued") + _ids(store, "scheduled")
        for action_id in rng.sample(live, min(len(live), rng.randint(1, 3))):
            store.cancel_action(action_id, now)
    elif kind == "report":
        for action_id in _ids(store, "scheduled") + _ids(store, "running"):
            outcome = rng.choice(list(ReportedOutcome))
            if outcome is not ReportedOutcome.STARTING and rng.random() < 0.4:
                with contextlib.suppress(SluiceError):  # a running one cannot start again
                    store.report(action_id, outcome, now)
    elif kind == "move":
        queued = _ids(store, "queued")
        if queued:
            action_id = rng.choice(queued)
            current = store.get_action(action_id).action.queue
            to = rng.choice([q for q in QUEUES if q != current])
            store.move_actions(to, now, lambda sources, snapshot: None, ids=[action_id])
    elif kind == "prune":
        # Finished rows go, including ones that finished since the reader last read.
        store.prune_finished(now, Retention(max_age=None, max_count=rng.randint(0, 3)), ())
    else:
        store.update_queue(rng.choice(QUEUES[1:]), {"priority": rng.randint(0, 3)})
    return serial


def _same(kept: SqlTickIO, target: str, now: datetime) -> Snapshot:
    incremental, invalid = kept.read_tick_input_unchecked(now)
    fresh = SqlTickIO(target, reader_only=True)
    try:
        full, full_invalid = fresh.read_tick_input_unchecked(now)
    finally:
        fresh.close()
    assert incremental.snapshot.model_dump_json() == full.snapshot.model_dump_json()
    assert incremental.generation == full.generation
    assert invalid == full_invalid
    return incremental.snapshot


@pytest.mark.parametrize("seed", [0, 1])
def test_every_incremental_read_is_the_full_read(database: str, seed: int) -> None:
    store = SqlStore(database)
    store.put_cluster(Cluster.model_validate(CLUSTER))
    for name in QUEUES[1:]:
        store.create_queue(Queue(name=name, max_accelerators={"H100": 4}))
    kept = SqlTickIO(database, reader_only=True)  # the worker's reader, kept between ticks
    rng = random.Random(seed)
    serial = 0
    seen_live = seen_finished = 0
    try:
        for step in range(60):
            now = START + timedelta(minutes=step)
            serial = _step(store, rng, serial, now)
            snapshot = _same(kept, database, now)
            seen_live = max(seen_live, len(snapshot.actions))
        seen_finished = len(_ids(store, "succeeded")) + len(_ids(store, "cancelled"))
    finally:
        kept.close()
        store.close()
    assert seen_live > 10 and seen_finished > 0  # the walk did change the line


def test_an_action_finished_and_pruned_between_reads_leaves_the_snapshot(database: str) -> None:
    store = SqlStore(database)
    store.put_cluster(Cluster.model_validate(CLUSTER))
    rng = random.Random(2)
    store.submit([_action(i, rng).model_copy(update={"queue": "default"}) for i in range(3)])
    kept = SqlTickIO(database, reader_only=True)
    try:
        assert len(_same(kept, database, START).actions) == 3
        store.cancel_action("x-1", START)
        # Pruned before the reader reads again: the row's change is gone with the row.
        store.prune_finished(START, Retention(max_age=None, max_count=0), ())
        snapshot = _same(kept, database, START)
    finally:
        kept.close()
        store.close()
    assert [action.id for action in snapshot.actions] == ["x-0", "x-2"]


def test_a_database_made_again_under_the_same_url_is_read_afresh(postgres_database: str) -> None:
    url = fresh_schema(postgres_database)
    schema = parse_qs(urlparse(url).query)["options"][0].removeprefix("-csearch_path=")
    rng = random.Random(3)
    store = SqlStore(url)
    store.submit([_action(i, rng).model_copy(update={"queue": "default"}) for i in range(4)])
    kept = SqlTickIO(url, reader_only=True)
    try:
        assert len(kept.read_snapshot(START).actions) == 4
        store.close()
        with psycopg.connect(postgres_database, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
            admin.execute(f"CREATE SCHEMA {schema}")
        store = SqlStore(url)  # its change numbers start again, below the reader's
        for i in range(6):  # and pass them: more changes than the first database had
            store.submit([_action(10 + i, rng).model_copy(update={"queue": "default"})])
        snapshot = _same(kept, url, START)
    finally:
        kept.close()
        store.close()
    assert [action.id for action in snapshot.actions] == [f"x-{10 + i}" for i in range(6)]


def test_a_file_from_before_change_numbers_reads_incrementally_once_upgraded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    rng = random.Random(4)
    store = SqlStore(path)
    store.submit([_action(i, rng).model_copy(update={"queue": "default"}) for i in range(5)])
    store.close()
    downgrade(path, 7)
    store = SqlStore(path)  # its rows carry no change number yet
    kept = SqlTickIO(path, reader_only=True)
    try:
        assert len(_same(kept, str(path), START).actions) == 5
        store.cancel_action("x-3", START)
        store.submit([_action(9, rng).model_copy(update={"queue": "default"})])
        snapshot = _same(kept, str(path), START)
    finally:
        kept.close()
        store.close()
    assert [action.id for action in snapshot.actions] == ["x-0", "x-1", "x-2", "x-4", "x-9"]
