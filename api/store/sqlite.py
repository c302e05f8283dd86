"""Durable state of the tick service: one small interface and its SQLite implementation.

Everything a tick needs (queues, clusters, organization settings, reusable
environments, every action with its whole life) lives here. Domain objects are
stored as the JSON of their pydantic models; the columns beside them are only
what queries filter or order on.

Durability: the database runs in WAL mode with `synchronous=FULL`, so a
transaction is on disk when COMMIT returns. A submission is acknowledged only
after its COMMIT; a tick's decisions are applied in one transaction. Concurrent
submissions share one COMMIT (group commit, see `SqliteStore.submit`), which is
what lets durable writes keep up with many callers.
"""

from __future__ import annotations

import json
import logging
import queue as queue_mod
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from api.store.job_queues import QUOTA_SCHEMA, AppliedJobs, QuotaStore, SqliteQuotaStore
from models.errors import (
    AlreadyExists,
    ErrorCode,
    FailedPrecondition,
    InvalidInput,
    NotFound,
    QueueDraining,
    ResourceExhausted,
    SluiceError,
    Unavailable,
)
from models.result import TickResult
from models.snapshot import (
    DEFAULT_QUEUE,
    Action,
    ActionState,
    Cluster,
    ContainerPlacement,
    Environment,
    Placement,
    Queue,
    Settings,
    Snapshot,
)

SCHEMA_VERSION = 2  # 2 added the job queues' tables (api.store.job_queues); 1 is upgraded in place

log = logging.getLogger("sluice.store")


class Phase(StrEnum):
    """Where an action is in its life. Only the first three hold a place in the queue."""

    QUEUED = "queued"
    SCHEDULED = "scheduled"  # the tick placed it; charges count from here
    RUNNING = "running"  # an executor reported it started
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def live(self) -> bool:
        return self in LIVE_PHASES

    @property
    def charged(self) -> bool:
        """Scheduled and unfinished: what a queue's caps count."""
        return self in (Phase.SCHEDULED, Phase.RUNNING)


LIVE_PHASES = (Phase.QUEUED, Phase.SCHEDULED, Phase.RUNNING)
_LIVE_SQL = "('queued', 'scheduled', 'running')"


@dataclass(frozen=True)
class QueueRecord:
    queue: Queue  # settings, with head_blocked_since as persisted by the last tick
    draining: bool


@dataclass(frozen=True)
class QueueCounts:
    """Live actions of one queue, counted in the store (not by a tick)."""

    queued: int = 0
    scheduled: int = 0
    running: int = 0

    @property
    def depth_used(self) -> int:
        """In flight plus waiting: what the depth limit counts."""
        return self.queued + self.scheduled + self.running


@dataclass(frozen=True)
class ActionRecord:
    action: Action  # as submitted (state queued, no placement)
    phase: Phase
    placement: Placement | None
    code: ErrorCode | None
    message: str | None
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def submitted(cls, action: Action) -> ActionRecord:
        """The record of an action just submitted."""
        return cls(action, Phase.QUEUED, None, None, None, None, None, None)


@dataclass(frozen=True)
class EnvironmentRecord:
    environment: Environment  # running and placement filled in


@dataclass(frozen=True)
class AppliedTick:
    """What of a tick's decisions still applied when it was written back."""

    scheduled: int
    failed: int
    environments_started: int
    stale: list[str] = field(default_factory=list)  # actions that changed during the tick
    jobs: AppliedJobs = field(default_factory=AppliedJobs)  # the job queues' decisions


class Outcome(StrEnum):
    """What an executor reports about a scheduled action."""

    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Store(QuotaStore, Protocol):
    """The service's only access to durable state."""

    def get_settings(self) -> Settings: ...
    def put_settings(self, settings: Settings) -> None: ...

    def create_queue(self, queue: Queue) -> QueueRecord: ...
    def update_queue(self, name: str, changes: dict[str, Any]) -> QueueRecord: ...
    def get_queue(self, name: str) -> QueueRecord: ...
    def list_queues(self) -> list[QueueRecord]: ...
    def set_draining(self, name: str, draining: bool) -> QueueRecord: ...
    def delete_queue(self, name: str) -> None: ...
    def queue_counts(self, queue: str | None = None) -> dict[str, QueueCounts]: ...

    def put_cluster(self, cluster: Cluster) -> None: ...
    def get_cluster(self, name: str) -> Cluster: ...
    def list_clusters(self) -> list[Cluster]: ...
    def delete_cluster(self, name: str) -> None: ...

    def put_environment(self, environment: Environment) -> EnvironmentRecord: ...
    def get_environment(self, name: str) -> EnvironmentRecord: ...
    def list_environments(self) -> list[EnvironmentRecord]: ...
    def stop_environment(self, name: str) -> EnvironmentRecord: ...

    def submit(self, actions: list[Action]) -> None: ...
    def get_action(self, action_id: str) -> ActionRecord: ...
    def list_actions(
        self,
        *,
        queue: str | None = None,
        phase: Phase | None = None,
        cluster: str | None = None,
        limit: int = 100,
    ) -> list[ActionRecord]: ...
    def cancel_action(self, action_id: str, now: datetime) -> ActionRecord: ...
    def report(
        self,
        action_id: str,
        outcome: Outcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> ActionRecord: ...

    def read_snapshot(self, now: datetime) -> Snapshot: ...
    def apply_tick(self, result: TickResult) -> AppliedTick: ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS settings (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queues (
    name TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    draining INTEGER NOT NULL DEFAULT 0,
    head_blocked_since TEXT
);
CREATE TABLE IF NOT EXISTS clusters (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
    name TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    placement TEXT,
    cluster TEXT
);
CREATE TABLE IF NOT EXISTS actions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    phase TEXT NOT NULL,
    body TEXT NOT NULL,
    environment TEXT,
    placement TEXT,
    cluster TEXT,
    code TEXT,
    message TEXT,
    submitted_at TEXT NOT NULL,
    scheduled_at TEXT,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS actions_queue_phase ON actions (queue, phase);
CREATE INDEX IF NOT EXISTS actions_live ON actions (seq)
    WHERE phase IN ('queued', 'scheduled', 'running');
"""


def _ts(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _queue_body(queue: Queue) -> str:
    # head_blocked_since has its own column: the tick writes it, people write the rest.
    return queue.model_dump_json(exclude={"head_blocked_since"})


def _environment_body(environment: Environment) -> str:
    return environment.model_dump_json(exclude={"running", "placement"})


class _ActionCache:
    """Validated actions by id, so a tick does not parse thousands of JSON bodies again.

    An action's body never changes after submission, and its placement never
    changes once set, so both parsed forms stay valid for the action's life.
    The solver receives these shared objects and must not mutate them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0  # advanced by each snapshot read
        self._submitted: dict[str, tuple[Action, int]] = {}
        self._placed: dict[str, Action] = {}  # the running form, with state and placement

    def remember(self, actions: list[Action]) -> None:
        with self._lock:
            for action in actions:
                self._submitted[action.id] = (action, self._generation)

    def start_read(self) -> int:
        """Call before the snapshot's read transaction begins."""
        with self._lock:
            self._generation += 1
            return self._generation

    def missing(self, ids: list[str]) -> list[str]:
        with self._lock:
            return [action_id for action_id in ids if action_id not in self._submitted]

    def live(
        self, rows: list[tuple[str, str, str | None]], bodies: dict[str, str], generation: int
    ) -> list[Action]:
        """The snapshot's actions for rows of (id, phase, placement), in order.

        Entries of actions that are no longer live are dropped, except those
        remembered since the read began (submitted after its transaction started).
        """
        with self._lock:
            for action_id, body in bodies.items():
                self._submitted[action_id] = (Action.model_validate_json(body), generation)
            actions: list[Action] = []
            placed: dict[str, Action] = {}
            for action_id, phase, placement in rows:
                action = self._submitted[action_id][0]
                if phase != Phase.QUEUED:
                    # Scheduled and running actions both hold their charges.
                    action = self._placed.get(action_id) or action.model_copy(
                        update={
                            "state": ActionState.RUNNING,
                            "placement": Placement.model_validate_json(placement)
                            if placement
                            else None,
                        }
                    )
                    placed[action_id] = action
                actions.append(action)
            live = {action_id for action_id, _, _ in rows}
            self._submitted = {
                action_id: entry
                for action_id, entry in self._submitted.items()
                if action_id in live or entry[1] >= generation
            }
            self._placed = placed
            return actions


@dataclass
class _Ticket:
    """One caller's submission waiting for the next group commit."""

    actions: list[Action]
    done: bool = False
    error: SluiceError | None = None


class SqliteStore(SqliteQuotaStore):
    """The embedded default: one SQLite file in WAL mode with fsync on every commit.

    All writes go through one connection under a lock (SQLite has one writer
    anyway); reads use a small pool of connections, so reads never wait for a
    write and a snapshot is one consistent read transaction.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._write_lock = threading.Lock()
        self._writer = self._connect()
        self._readers: queue_mod.SimpleQueue[sqlite3.Connection] = queue_mod.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        self._actions = _ActionCache()
        self._snapshot_lock = threading.Lock()
        self._writer.execute("PRAGMA journal_mode=WAL")
        self._writer.executescript(_SCHEMA + QUOTA_SCHEMA)
        with self._write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) == 1:  # version 2 only added tables, created just above
                conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
            elif int(row[0]) != SCHEMA_VERSION:
                raise FailedPrecondition(
                    f"{self.path}: schema version {row[0]}, this Sluice reads {SCHEMA_VERSION}"
                )
            if conn.execute("SELECT 1 FROM settings").fetchone() is None:
                conn.execute("INSERT INTO settings VALUES (1, ?)", (Settings().model_dump_json(),))
            # The default queue always exists: work that names no queue goes there.
            conn.execute(
                "INSERT OR IGNORE INTO queues (name, body) VALUES (?, ?)",
                (DEFAULT_QUEUE, _queue_body(Queue(name=DEFAULT_QUEUE))),
            )

    # -- connections -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
        except sqlite3.Error as error:
            raise Unavailable(f"cannot open the database {self.path}: {error}") from None
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and fsynced) on success, rolled back on error."""
        with self._write_lock, self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the writer connection; the caller holds the write lock."""
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same committed state."""
        try:
            conn = self._readers.get_nowait()
        except queue_mod.Empty:
            conn = self._connect()
            with self._readers_lock:
                self._all_readers.append(conn)
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        finally:
            self._readers.put(conn)

    def close(self) -> None:
        with self._write_lock:
            self._writer.close()
        with self._readers_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()

    # -- settings ------------------------------------------------------------------------------

    def get_settings(self) -> Settings:
        with self._read() as conn:
            (body,) = conn.execute("SELECT body FROM settings").fetchone()
        return Settings.model_validate_json(body)

    def put_settings(self, settings: Settings) -> None:
        with self._write() as conn:
            conn.execute("UPDATE settings SET body = ?", (settings.model_dump_json(),))

    # -- queues --------------------------------------------------------------------------------

    @staticmethod
    def _queue_record(row: tuple[str, int, str | None]) -> QueueRecord:
        body, draining, blocked = row
        queue = Queue.model_validate_json(body)
        if blocked is not None:
            queue = queue.model_copy(update={"head_blocked_since": _dt(blocked)})
        return QueueRecord(queue=queue, draining=bool(draining))

    @staticmethod
    def _fetch_queue(conn: sqlite3.Connection, name: str) -> QueueRecord:
        row = conn.execute(
            "SELECT body, draining, head_blocked_since FROM queues WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"queue {name!r} does not exist", field="queue")
        return SqliteStore._queue_record(row)

    @staticmethod
    def _check_routes(conn: sqlite3.Connection, queue: Queue) -> None:
        for cluster in queue.clusters or []:
            if conn.execute("SELECT 1 FROM clusters WHERE name = ?", (cluster,)).fetchone() is None:
                raise InvalidInput(
                    f"clusters: queue {queue.name} routes to {cluster!r}, which is not a"
                    " known cluster (put the cluster first)",
                    field="clusters",
                )

    def create_queue(self, queue: Queue) -> QueueRecord:
        with self._write() as conn:
            self._check_routes(conn, queue)
            try:
                conn.execute(
                    "INSERT INTO queues (name, body) VALUES (?, ?)",
                    (queue.name, _queue_body(queue)),
                )
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"queue {queue.name!r} already exists", field="name") from None
        return QueueRecord(queue=queue, draining=False)

    def update_queue(self, name: str, changes: dict[str, Any]) -> QueueRecord:
        """Apply `changes` (field -> new value, in the JSON spelling) to queue `name`."""
        with self._write() as conn:
            current = self._fetch_queue(conn, name)
            data = json.loads(_queue_body(current.queue))
            data.update(changes)
            queue = Queue.model_validate(data)
            self._check_routes(conn, queue)
            conn.execute("UPDATE queues SET body = ? WHERE name = ?", (_queue_body(queue), name))
        return QueueRecord(
            queue=queue.model_copy(update={"head_blocked_since": current.queue.head_blocked_since}),
            draining=current.draining,
        )

    def get_queue(self, name: str) -> QueueRecord:
        with self._read() as conn:
            return self._fetch_queue(conn, name)

    def list_queues(self) -> list[QueueRecord]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT body, draining, head_blocked_since FROM queues ORDER BY name"
            ).fetchall()
        return [self._queue_record(row) for row in rows]

    def set_draining(self, name: str, draining: bool) -> QueueRecord:
        with self._write() as conn:
            current = self._fetch_queue(conn, name)
            conn.execute("UPDATE queues SET draining = ? WHERE name = ?", (int(draining), name))
        return QueueRecord(queue=current.queue, draining=draining)

    def delete_queue(self, name: str) -> None:
        if name == DEFAULT_QUEUE:
            raise FailedPrecondition(
                "the default queue always exists: work that names no queue goes there",
                field="name",
            )
        with self._write() as conn:
            self._fetch_queue(conn, name)
            (live,) = conn.execute(
                f"SELECT COUNT(*) FROM actions WHERE queue = ? AND phase IN {_LIVE_SQL}", (name,)
            ).fetchone()
            if live:
                raise FailedPrecondition(
                    f"queue {name} is not empty: {live} actions are waiting or in flight;"
                    " drain it and wait for them to finish (or cancel them) first"
                )
            running = conn.execute(
                "SELECT name FROM environments WHERE queue = ? AND running = 1", (name,)
            ).fetchone()
            if running:
                raise FailedPrecondition(
                    f"queue {name} still has the reusable environment {running[0]} running;"
                    " stop it first"
                )
            conn.execute("DELETE FROM environments WHERE queue = ?", (name,))
            conn.execute("DELETE FROM queues WHERE name = ?", (name,))

    def queue_counts(self, queue: str | None = None) -> dict[str, QueueCounts]:
        """Live actions per queue (of one queue, when named)."""
        sql = f"SELECT queue, phase, COUNT(*) FROM actions WHERE phase IN {_LIVE_SQL}"
        args: tuple[str, ...] = ()
        if queue is not None:
            sql, args = sql + " AND queue = ?", (queue,)
        with self._read() as conn:
            rows = conn.execute(sql + " GROUP BY queue, phase", args).fetchall()
        tallies: dict[str, dict[str, int]] = {}
        for queue, phase, count in rows:
            tallies.setdefault(queue, {})[phase] = count
        return {queue: QueueCounts(**tally) for queue, tally in tallies.items()}

    # -- clusters ------------------------------------------------------------------------------

    @staticmethod
    def _check_placements_fit(conn: sqlite3.Connection, cluster: Cluster) -> None:
        """Refuse a cluster change that would strand a placed action or pool."""
        pools = {pool.name: pool for pool in cluster.node_pools}
        rows = conn.execute(
            f"SELECT id, placement FROM actions WHERE cluster = ? AND phase IN {_LIVE_SQL}"
            " UNION ALL SELECT name, placement FROM environments WHERE cluster = ? AND running = 1",
            (cluster.name, cluster.name),
        ).fetchall()
        for owner, placement_json in rows:
            for spot in Placement.model_validate_json(placement_json).containers:
                pool = pools.get(spot.node_pool)
                if pool is None or spot.node >= max(pool.full_scale, pool.nodes):
                    raise FailedPrecondition(
                        f"cluster {cluster.name}: {owner} runs on node {spot.node} of node pool"
                        f" {spot.node_pool}, which this change removes; wait for it to finish",
                        field="node_pools",
                    )

    def put_cluster(self, cluster: Cluster) -> None:
        with self._write() as conn:
            self._check_placements_fit(conn, cluster)
            conn.execute(
                "INSERT INTO clusters VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET body = excluded.body",
                (cluster.name, cluster.model_dump_json()),
            )

    def get_cluster(self, name: str) -> Cluster:
        with self._read() as conn:
            row = conn.execute("SELECT body FROM clusters WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"cluster {name!r} does not exist", field="cluster")
        return Cluster.model_validate_json(row[0])

    def list_clusters(self) -> list[Cluster]:
        with self._read() as conn:
            rows = conn.execute("SELECT body FROM clusters ORDER BY name").fetchall()
        return [Cluster.model_validate_json(body) for (body,) in rows]

    def delete_cluster(self, name: str) -> None:
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM clusters WHERE name = ?", (name,)).fetchone() is None:
                raise NotFound(f"cluster {name!r} does not exist", field="cluster")
            for body, draining, blocked in conn.execute(
                "SELECT body, draining, head_blocked_since FROM queues"
            ).fetchall():
                queue = self._queue_record((body, draining, blocked)).queue
                if name in (queue.clusters or []):
                    raise FailedPrecondition(
                        f"queue {queue.name} routes to cluster {name}; change its clusters first"
                    )
            self._check_placements_fit(conn, Cluster(name=name))
            conn.execute("DELETE FROM clusters WHERE name = ?", (name,))

    # -- environments --------------------------------------------------------------------------

    @staticmethod
    def _environment_record(row: tuple[str, int, str | None]) -> EnvironmentRecord:
        body, running, placement = row
        data = json.loads(body)
        data["running"] = bool(running)
        data["placement"] = json.loads(placement) if placement else None
        return EnvironmentRecord(environment=Environment.model_validate(data))

    def put_environment(self, environment: Environment) -> EnvironmentRecord:
        """Define or resize a reusable pool; a running pool keeps its size until it stops."""
        with self._write() as conn:
            self._fetch_queue(conn, environment.queue)
            row = conn.execute(
                "SELECT queue, running FROM environments WHERE name = ?", (environment.name,)
            ).fetchone()
            if row is not None and row[1]:
                raise FailedPrecondition(
                    f"environment {environment.name} is running; its pool is charged at the size"
                    " it started with, so stop it before changing it",
                    field="name",
                )
            if row is not None and row[0] != environment.queue:
                (live,) = conn.execute(
                    f"SELECT COUNT(*) FROM actions WHERE environment = ? AND phase IN {_LIVE_SQL}",
                    (environment.name,),
                ).fetchone()
                if live:
                    raise FailedPrecondition(
                        f"environment {environment.name} has {live} live actions on queue"
                        f" {row[0]}; it cannot move to queue {environment.queue} now",
                        field="queue",
                    )
            conn.execute(
                "INSERT INTO environments (name, queue, body) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, body = excluded.body",
                (environment.name, environment.queue, _environment_body(environment)),
            )
        return EnvironmentRecord(environment=environment.model_copy(update={"running": False}))

    def get_environment(self, name: str) -> EnvironmentRecord:
        with self._read() as conn:
            row = conn.execute(
                "SELECT body, running, placement FROM environments WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFound(f"environment {name!r} does not exist", field="environment")
        return self._environment_record(row)

    def list_environments(self) -> list[EnvironmentRecord]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT body, running, placement FROM environments ORDER BY name"
            ).fetchall()
        return [self._environment_record(row) for row in rows]

    def stop_environment(self, name: str) -> EnvironmentRecord:
        """The pool's containers shut down: its charges are freed."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT body, running, placement FROM environments WHERE name = ?", (name,)
            ).fetchone()
            if row is None:
                raise NotFound(f"environment {name!r} does not exist", field="environment")
            (live,) = conn.execute(
                "SELECT COUNT(*) FROM actions WHERE environment = ?"
                " AND phase IN ('scheduled', 'running')",
                (name,),
            ).fetchone()
            if live:
                raise FailedPrecondition(
                    f"environment {name} still runs {live} actions; it stops when they finish"
                )
            conn.execute(
                "UPDATE environments SET running = 0, placement = NULL, cluster = NULL"
                " WHERE name = ?",
                (name,),
            )
        return self._environment_record((row[0], 0, None))

    # -- actions -------------------------------------------------------------------------------

    def submit(self, actions: list[Action]) -> None:
        """Store `actions` durably, all or none; return only once they are on disk.

        Callers on other threads that submit at the same time share one COMMIT:
        whoever gets the write lock commits every ticket pending by then, each in
        its own savepoint so one rejected batch does not undo another.
        """
        ticket = _Ticket(actions)
        with self._pending_lock:
            self._pending.append(ticket)
        with self._write_lock:
            if not ticket.done:
                with self._pending_lock:
                    tickets, self._pending = self._pending, []
                self._commit_tickets(tickets)
        if ticket.error is not None:
            raise ticket.error

    def _commit_tickets(self, tickets: list[_Ticket]) -> None:
        try:
            with self._transaction() as conn:
                for ticket in tickets:
                    conn.execute("SAVEPOINT submission")
                    try:
                        self._insert_actions(conn, ticket.actions)
                    except SluiceError as error:
                        conn.execute("ROLLBACK TO submission")
                        ticket.error = error
                    conn.execute("RELEASE submission")
        except Exception as error:  # every caller must learn its submission was not stored
            if not isinstance(error, sqlite3.Error):
                log.exception("unexpected error committing %d submissions", len(tickets))
            failure = Unavailable(f"could not store the submission: {error}")
            for ticket in tickets:
                ticket.error = ticket.error or failure
        for ticket in tickets:
            if ticket.error is None:
                self._actions.remember(ticket.actions)
            ticket.done = True

    @staticmethod
    def _insert_actions(conn: sqlite3.Connection, actions: list[Action]) -> None:
        queues: dict[str, QueueRecord] = {}
        for action in actions:
            if action.queue not in queues:
                queues[action.queue] = SqliteStore._fetch_queue(conn, action.queue)
        for name, record in queues.items():
            if record.draining:
                raise QueueDraining(
                    f"queue {name} is draining: it finishes what it holds and accepts nothing"
                    " new; submit to another queue",
                    field="queue",
                )
            depth = record.queue.depth
            if depth is None:
                continue
            adding = sum(1 for action in actions if action.queue == name)
            (used,) = conn.execute(
                f"SELECT COUNT(*) FROM actions WHERE queue = ? AND phase IN {_LIVE_SQL}", (name,)
            ).fetchone()
            if used + adding > depth:
                raise ResourceExhausted(
                    f"queue {name} is full: depth {depth}, {used} in flight or waiting,"
                    f" {adding} more submitted; slow down and retry later",
                    field="queue",
                )
        environments: dict[str, str | None] = {}
        for action in actions:
            if action.environment is None:
                continue
            if action.environment not in environments:
                row = conn.execute(
                    "SELECT queue FROM environments WHERE name = ?", (action.environment,)
                ).fetchone()
                environments[action.environment] = row[0] if row else None
            owner = environments[action.environment]
            if owner is None:
                raise NotFound(
                    f"environment {action.environment!r} does not exist (put it first)",
                    field="environment",
                )
            if owner != action.queue:
                raise InvalidInput(
                    f"environment {action.environment} belongs to queue {owner}, not"
                    f" {action.queue}",
                    field="queue",
                )
        try:
            conn.executemany(
                "INSERT INTO actions (id, queue, phase, body, environment, submitted_at)"
                " VALUES (?, ?, 'queued', ?, ?, ?)",
                [
                    (
                        action.id,
                        action.queue,
                        action.model_dump_json(exclude={"state", "placement"}),
                        action.environment,
                        _ts(action.submitted_at),
                    )
                    for action in actions
                ],
            )
        except sqlite3.IntegrityError:
            taken = [
                action.id
                for action in actions
                if conn.execute("SELECT 1 FROM actions WHERE id = ?", (action.id,)).fetchone()
            ]
            ids = taken or [a.id for a in actions]
            raise AlreadyExists(
                f"action {ids[0]!r} already exists (ids must be unique)", field="id"
            ) from None

    _ACTION_COLUMNS = "body, phase, placement, code, message, scheduled_at, started_at, finished_at"

    @staticmethod
    def _action_record(row: tuple[Any, ...]) -> ActionRecord:
        body, phase, placement, code, message, scheduled_at, started_at, finished_at = row
        return ActionRecord(
            action=Action.model_validate_json(body),
            phase=Phase(phase),
            placement=Placement.model_validate_json(placement) if placement else None,
            code=ErrorCode(code) if code else None,
            message=message,
            scheduled_at=_dt(scheduled_at),
            started_at=_dt(started_at),
            finished_at=_dt(finished_at),
        )

    def _fetch_action(self, conn: sqlite3.Connection, action_id: str) -> ActionRecord:
        row = conn.execute(
            f"SELECT {self._ACTION_COLUMNS} FROM actions WHERE id = ?", (action_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"action {action_id!r} does not exist", field="action")
        return self._action_record(row)

    def get_action(self, action_id: str) -> ActionRecord:
        with self._read() as conn:
            return self._fetch_action(conn, action_id)

    def list_actions(
        self,
        *,
        queue: str | None = None,
        phase: Phase | None = None,
        cluster: str | None = None,
        limit: int = 100,
    ) -> list[ActionRecord]:
        """Actions in arrival order, filtered; executors poll `phase=scheduled` here."""
        where, args = [], []
        for column, value in (("queue", queue), ("phase", phase), ("cluster", cluster)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(str(value))
        sql = f"SELECT {self._ACTION_COLUMNS} FROM actions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit)).fetchall()
        return [self._action_record(row) for row in rows]

    def cancel_action(self, action_id: str, now: datetime) -> ActionRecord:
        with self._write() as conn:
            record = self._fetch_action(conn, action_id)
            if not record.phase.live:
                raise FailedPrecondition(
                    f"action {action_id} already finished ({record.phase.value})", field="action"
                )
            conn.execute(
                "UPDATE actions SET phase = 'cancelled', finished_at = ? WHERE id = ?",
                (_ts(now), action_id),
            )
            return self._fetch_action(conn, action_id)

    def report(
        self,
        action_id: str,
        outcome: Outcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> ActionRecord:
        """An executor's word on a scheduled action; finishing frees its charges."""
        with self._write() as conn:
            record = self._fetch_action(conn, action_id)
            allowed = (
                (Phase.SCHEDULED,)
                if outcome is Outcome.STARTED
                else (Phase.SCHEDULED, Phase.RUNNING)
            )
            if record.phase not in allowed:
                raise FailedPrecondition(
                    f"action {action_id} is {record.phase.value}; only"
                    f" {' or '.join(p.value for p in allowed)} actions can be reported"
                    f" {outcome.value}",
                    field="action",
                )
            if outcome is Outcome.STARTED:
                conn.execute(
                    "UPDATE actions SET phase = 'running', started_at = ? WHERE id = ?",
                    (_ts(now), action_id),
                )
            elif outcome is Outcome.SUCCEEDED:
                conn.execute(
                    "UPDATE actions SET phase = 'succeeded', finished_at = ? WHERE id = ?",
                    (_ts(now), action_id),
                )
            else:
                conn.execute(
                    "UPDATE actions SET phase = 'failed', code = ?, message = ?, finished_at = ?"
                    " WHERE id = ?",
                    (
                        code.value if code else None,
                        message or "the executor reported a failure",
                        _ts(now),
                        action_id,
                    ),
                )
            return self._fetch_action(conn, action_id)

    # -- the tick ------------------------------------------------------------------------------

    def read_snapshot(self, now: datetime) -> Snapshot:
        """Everything the tick needs, read in one transaction so it is consistent."""
        # One snapshot read at a time: the action cache is consulted, then pruned.
        with self._snapshot_lock:
            return self._read_snapshot(now)

    def _read_snapshot(self, now: datetime) -> Snapshot:
        generation = self._actions.start_read()
        with self._read() as conn:
            (settings,) = conn.execute("SELECT body FROM settings").fetchone()
            queue_rows = conn.execute(
                "SELECT body, head_blocked_since FROM queues ORDER BY name"
            ).fetchall()
            cluster_rows = conn.execute("SELECT body FROM clusters ORDER BY name").fetchall()
            environment_rows = conn.execute(
                "SELECT body, running, placement FROM environments ORDER BY name"
            ).fetchall()
            action_rows = conn.execute(
                f"SELECT id, phase, placement FROM actions WHERE phase IN {_LIVE_SQL} ORDER BY seq"
            ).fetchall()
            quota = self._quota_snapshot(conn)  # the job queues, in the same transaction
            missing = self._actions.missing([action_id for action_id, _, _ in action_rows])
            bodies: dict[str, str] = {}
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                bodies.update(
                    conn.execute(
                        f"SELECT id, body FROM actions WHERE id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    ).fetchall()
                )
        queues = []
        for body, blocked in queue_rows:
            data = json.loads(body)
            data["head_blocked_since"] = blocked
            queues.append(data)
        environments = []
        for body, running, placement in environment_rows:
            data = json.loads(body)
            data["running"] = bool(running)
            data["placement"] = json.loads(placement) if placement else None
            environments.append(data)
        return Snapshot.model_validate(
            {
                "now": now,
                "settings": json.loads(settings),
                "queues": queues,
                "clusters": [json.loads(body) for (body,) in cluster_rows],
                "environments": environments,
                "actions": self._actions.live(action_rows, bodies, generation),
                **quota,
            }
        )

    def apply_tick(self, result: TickResult) -> AppliedTick:
        """Write a tick's decisions back in one transaction: all of them or none.

        A decision applies only to an action still queued: one cancelled while the
        tick ran stays cancelled, and no action is ever scheduled twice.
        """
        now = _ts(result.now)
        stale: list[str] = []
        scheduled = failed = started = 0
        with self._write() as conn:
            for start in result.environments_started:
                placement = Placement(
                    cluster=start.cluster,
                    containers=[
                        ContainerPlacement(name=c.name, node_pool=c.node_pool, node=c.node)
                        for c in start.containers
                    ],
                )
                started += conn.execute(
                    "UPDATE environments SET running = 1, placement = ?, cluster = ?"
                    " WHERE name = ? AND running = 0",
                    (placement.model_dump_json(), start.cluster, start.environment),
                ).rowcount
            for decision in result.scheduled:
                placement_json = cluster = None
                if decision.cluster is not None:
                    cluster = decision.cluster
                    placement_json = Placement(
                        cluster=decision.cluster,
                        containers=[
                            ContainerPlacement(name=c.name, node_pool=c.node_pool, node=c.node)
                            for c in decision.containers
                        ],
                    ).model_dump_json()
                elif decision.environment is not None:
                    # Joining a pool: the pool must be up, or the action stays queued.
                    row = conn.execute(
                        "SELECT running FROM environments WHERE name = ?", (decision.environment,)
                    ).fetchone()
                    if not row or not row[0]:
                        stale.append(decision.action)
                        continue
                changed = conn.execute(
                    "UPDATE actions SET phase = 'scheduled', placement = ?, cluster = ?,"
                    " scheduled_at = ? WHERE id = ? AND phase = 'queued'",
                    (placement_json, cluster, now, decision.action),
                ).rowcount
                scheduled += changed
                if not changed:
                    stale.append(decision.action)
            for failure in result.failed:
                changed = conn.execute(
                    "UPDATE actions SET phase = 'failed', code = ?, message = ?, finished_at = ?"
                    " WHERE id = ? AND phase = 'queued'",
                    (failure.code.value, failure.message, now, failure.action),
                ).rowcount
                failed += changed
                if not changed:
                    stale.append(failure.action)
            conn.executemany(
                "UPDATE queues SET head_blocked_since = ? WHERE name = ?",
                [
                    (_ts(metrics.head_blocked_since) if metrics.head_blocked else None, name)
                    for name, metrics in result.queues.items()
                ],
            )
            jobs = self._apply_quota(conn, result.quota) if result.quota else AppliedJobs()
        return AppliedTick(
            scheduled=scheduled,
            failed=failed,
            environments_started=started,
            stale=stale,
            jobs=jobs,
        )
