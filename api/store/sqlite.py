"""The tick service's durable state: `SqliteStore`, one SQLite file joined from its parts.

Everything a tick needs (queues, clusters, organization settings, reusable
environments, every action with its whole life, and the quota-managed job queues)
lives in one file. The parts are api.store.actions (the capped queues' state),
api.store.job_queues (the job queues') and api.store.tick_io (a tick's snapshot and
write-back); this module adds the schema and the group commit of submissions.

Durability: the database runs in WAL mode with `synchronous=FULL`, so a
transaction is on disk when COMMIT returns. A submission is acknowledged only
after its COMMIT; a tick's decisions are applied in one transaction. Concurrent
submissions share one COMMIT (group commit, see `SqliteStore.submit`), which is
what lets durable writes keep up with many callers.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from api.store.actions import SqliteActions, queue_body
from api.store.connection import stored_time
from api.store.job_queues import SqliteJobQueues
from api.store.records import NOT_ROUTED, Routing
from api.store.retention import RETENTION_SCHEMA, SqliteRetention
from api.store.tasks import SqliteTasks
from api.store.tick_io import SqliteTickIO
from api.store.triggers import SqliteTriggers
from models.errors import FailedPrecondition, SluiceError, Unavailable
from models.snapshot import DEFAULT_QUEUE, Action, Queue, Settings

# 2 added the job queues' tables, 3 the triggers', two columns; 4 tasks; 5 the jobs' STARTING
# and the counts of pruned actions (retired_totals)
SCHEMA_VERSION = 5

log = logging.getLogger("sluice.store")

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
    cluster TEXT,
    idle_timeout_s REAL                     -- schema 3: stop the pool after this long unused
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
    finished_at TEXT,
    deadline_at TEXT,                       -- the action's deadline as a time (schema 3)
    queue_source TEXT                       -- schema 4: models.tasks.QueueSource; NULL before
);
CREATE INDEX IF NOT EXISTS actions_queue_phase ON actions (queue, phase);
CREATE INDEX IF NOT EXISTS actions_live ON actions (seq)
    WHERE phase IN ('queued', 'scheduled', 'running');
"""

_JOB_QUEUES_SCHEMA = """
CREATE TABLE IF NOT EXISTS scheduling_policies (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS service_environments (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS job_queues (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order: the first queue keeps an environment
    name TEXT NOT NULL UNIQUE,
    service_environment TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- arrival order; a preempted job keeps it
    id TEXT NOT NULL UNIQUE,
    job_queue TEXT NOT NULL,
    share TEXT NOT NULL,
    phase TEXT NOT NULL,
    body TEXT NOT NULL,                     -- the Job as submitted (QUEUED)
    code TEXT,
    message TEXT,
    submitted_at TEXT NOT NULL,
    scheduled_at TEXT,                      -- when it got its instances (the model's started_at)
    started_at TEXT,                        -- when an executor said it started
    finished_at TEXT,
    preemptions INTEGER NOT NULL DEFAULT 0,
    preempted_at TEXT,
    preempt_reason TEXT,
    preempt_beneficiary TEXT,
    preempt_message TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queue_phase ON jobs (job_queue, phase);
CREATE INDEX IF NOT EXISTS jobs_live_phases ON jobs (seq)
    WHERE phase IN ('QUEUED', 'SCHEDULED', 'STARTING', 'RUNNING');
DROP INDEX IF EXISTS jobs_live;                -- before schema 5, it left out STARTING
"""


_TRIGGERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS triggers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a re-created trigger's runs differ
    name TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    body TEXT NOT NULL,                     -- the Trigger (models.triggers)
    created_at TEXT NOT NULL,               -- a fixed rate counts from here
    next_due TEXT                           -- NULL while paused
);
CREATE INDEX IF NOT EXISTS triggers_due ON triggers (next_due) WHERE next_due IS NOT NULL;
CREATE TABLE IF NOT EXISTS trigger_firings (
    trigger_seq INTEGER NOT NULL,
    scheduled_for TEXT NOT NULL,
    fired_at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    run TEXT,
    missed INTEGER NOT NULL DEFAULT 0,
    message TEXT NOT NULL,
    PRIMARY KEY (trigger_seq, scheduled_for)  -- a scheduled time fires at most once
);
"""


_TASKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run_queues (run TEXT PRIMARY KEY, queue TEXT NOT NULL);
"""


@dataclass
class _Ticket:
    """One caller's submission waiting for the next group commit."""

    actions: list[Action]
    routing: Routing
    done: bool = False
    error: SluiceError | None = None


class SqliteStore(
    SqliteActions, SqliteJobQueues, SqliteTickIO, SqliteTriggers, SqliteTasks, SqliteRetention
):
    """The embedded default store: every part of the interface over one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        try:
            self._create_schema()
        except BaseException:
            self.close()  # a file this Sluice cannot read must not stay locked
            raise

    def _create_schema(self) -> None:
        schema = _SCHEMA + _JOB_QUEUES_SCHEMA + _TRIGGERS_SCHEMA + _TASKS_SCHEMA + RETENTION_SCHEMA
        self._writer_connection().executescript(schema)
        with self._write() as conn:
            self._add_schema_3_columns(conn)
            self._add_schema_4_columns(conn)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) in (1, 2, 3, 4):  # 2 to 5 added tables, columns and an index
                conn.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),)
                )
            elif int(row[0]) != SCHEMA_VERSION:
                raise FailedPrecondition(
                    f"{self.path}: schema version {row[0]}, this Sluice reads {SCHEMA_VERSION}"
                )
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('generation', '0')")
            if conn.execute("SELECT 1 FROM settings").fetchone() is None:
                conn.execute("INSERT INTO settings VALUES (1, ?)", (Settings().model_dump_json(),))
            # The default queue always exists: work that names no queue goes there.
            conn.execute(
                "INSERT OR IGNORE INTO queues (name, body) VALUES (?, ?)",
                (DEFAULT_QUEUE, queue_body(Queue(name=DEFAULT_QUEUE))),
            )

    @staticmethod
    def _add_schema_3_columns(conn: sqlite3.Connection) -> None:
        """Schema 3 keeps each action's deadline as a time, for expiry while it runs, and each
        environment's idle timeout: an older file gains the columns, the deadlines filled in
        for its live actions."""
        pools = {row[1] for row in conn.execute("PRAGMA table_info(environments)").fetchall()}
        if "idle_timeout_s" not in pools:
            conn.execute("ALTER TABLE environments ADD COLUMN idle_timeout_s REAL")
        columns = {row[1] for row in conn.execute("PRAGMA table_info(actions)").fetchall()}
        if "deadline_at" not in columns:
            conn.execute("ALTER TABLE actions ADD COLUMN deadline_at TEXT")
            live = conn.execute(
                "SELECT id, body FROM actions WHERE phase IN ('queued', 'scheduled', 'running')"
            ).fetchall()
            conn.executemany(
                "UPDATE actions SET deadline_at = ? WHERE id = ?",
                [
                    (stored_time(Action.model_validate_json(body).deadline_at()), action_id)
                    for action_id, body in live
                ],
            )
        conn.execute(
            "CREATE INDEX IF NOT EXISTS actions_deadline ON actions (deadline_at)"
            " WHERE deadline_at IS NOT NULL AND phase IN ('scheduled', 'running')"
        )

    @staticmethod
    def _add_schema_4_columns(conn: sqlite3.Connection) -> None:
        """Schema 4 keeps where each action's queue came from; older rows keep NULL (their
        submissions named a queue or defaulted to the default queue, which one is not known)."""
        columns = {row[1] for row in conn.execute("PRAGMA table_info(actions)").fetchall()}
        if "queue_source" not in columns:
            conn.execute("ALTER TABLE actions ADD COLUMN queue_source TEXT")

    # -- group commit of submissions -----------------------------------------------------------

    def submit(self, actions: list[Action], routing: Routing = NOT_ROUTED) -> None:
        """Store `actions` durably, all or none, with how their queues were chosen; return only
        once they are on disk.

        Callers on other threads that submit at the same time share one COMMIT:
        whoever gets the write lock commits every ticket pending by then, each in
        its own savepoint so one rejected batch does not undo another.
        """
        ticket = _Ticket(actions, routing)
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
                        self._record_routing(
                            conn, ticket.routing.sources, ticket.routing.run_queues
                        )
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
                self._action_cache.remember(ticket.actions)
            ticket.done = True
