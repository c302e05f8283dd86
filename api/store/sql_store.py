"""The tick service's durable state: `SqlStore`, one SQLite file joined from its parts.

Everything a tick needs (queues, clusters, organization settings, reusable
environments, every action with its whole life, and the quota-managed job queues)
lives in one file. The parts are api.store.actions (the capped queues' state),
api.store.job_queues (the job queues') and api.store.tick_io (a tick's snapshot and
write-back); this module adds the schema and the group commit of submissions.

Durability: the database runs in WAL mode with `synchronous=FULL`, so a
transaction is on disk when COMMIT returns. A submission is acknowledged only
after its COMMIT; a tick's decisions are applied in one transaction. Concurrent
submissions share one COMMIT (group commit, see `SqlStore.submit`), which is
what lets durable writes keep up with many callers.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from api.store.actions import SqlActions, queue_body
from api.store.job_queues import SqlJobQueues
from api.store.leadership import SqlLeadership
from api.store.migrations import migrate
from api.store.records import NOT_ROUTED, Routing, Submission
from api.store.retention import SqlRetention
from api.store.tasks import SqlTasks
from api.store.tick_io import SqlTickIO
from api.store.triggers import SqlTriggers
from models.errors import SluiceError, Unavailable
from models.snapshot import DEFAULT_QUEUE, Action, Queue, Settings

log = logging.getLogger("sluice.store")


@dataclass
class _Ticket:
    """One caller's submission waiting for the next group commit."""

    submission: Submission
    done: bool = False
    error: SluiceError | None = None


class SqlStore(
    SqlActions,
    SqlJobQueues,
    SqlTickIO,
    SqlTriggers,
    SqlTasks,
    SqlRetention,
    SqlLeadership,
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
        with self._write() as conn:
            migrate(conn, self.path)
            if self._db.exclusive:  # whoever held the lease before has let go of the file
                conn.execute("UPDATE leader_lease SET expires_s = 0 WHERE id = 1")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('generation', '0')"
                " ON CONFLICT (key) DO NOTHING"
            )
            if conn.execute("SELECT 1 FROM settings").fetchone() is None:
                conn.execute("INSERT INTO settings VALUES (1, ?)", (Settings().model_dump_json(),))
            # The default queue always exists: work that names no queue goes there.
            conn.execute(
                "INSERT INTO queues (name, body) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (DEFAULT_QUEUE, queue_body(Queue(name=DEFAULT_QUEUE))),
            )

    # -- group commit of submissions -----------------------------------------------------------

    def submit(self, actions: list[Action], routing: Routing = NOT_ROUTED) -> None:
        """Store `actions` durably, all or none, with how their queues were chosen; return only
        once they are on disk."""
        (error,) = self.submit_together([Submission(actions, routing)])
        if error is not None:
            raise error

    def submit_together(self, submissions: list[Submission]) -> list[SluiceError | None]:
        """Store each submission durably, all or none; return once every one is on disk (or
        refused), with each one's refusal (None: stored).

        These and the submissions other threads make at the same time share one COMMIT:
        whoever gets the write lock commits every ticket pending by then, each in its own
        savepoint so one rejected submission does not undo another.
        """
        mine = [_Ticket(submission) for submission in submissions]
        with self._pending_lock:
            self._pending += mine
        with self._write_lock:
            if not all(ticket.done for ticket in mine):
                with self._pending_lock:
                    tickets, self._pending = self._pending, []
                self._commit_tickets(tickets)
        return [ticket.error for ticket in mine]

    def _commit_tickets(self, tickets: list[_Ticket]) -> None:
        try:
            with self._transaction() as conn:
                for ticket in tickets:
                    conn.execute("SAVEPOINT submission")
                    try:
                        submission = ticket.submission
                        self._insert_actions(conn, submission.actions)
                        self._record_routing(
                            conn, submission.routing.sources, submission.routing.run_queues
                        )
                    except SluiceError as error:
                        conn.execute("ROLLBACK TO submission")
                        ticket.error = error
                    conn.execute("RELEASE submission")
        except Exception as error:  # every caller must learn its submission was not stored
            if not isinstance(error, (*self._db.driver_errors, Unavailable)):
                log.exception("unexpected error committing %d submissions", len(tickets))
            failure = Unavailable(f"could not store the submission: {error}")
            for ticket in tickets:
                ticket.error = ticket.error or failure
        for ticket in tickets:
            if ticket.error is None:
                self._live_actions.remember(ticket.submission.actions)
            ticket.done = True
