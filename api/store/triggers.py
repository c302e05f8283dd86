"""Triggers' durable state: each trigger, its next due time and its history of firings.

A firing and the run it submits commit in one write transaction, with the trigger's next
due time moved past it and a history row whose key is (trigger, scheduled time): a
scheduled time fires at most once, whatever kills the process and whenever it restarts.
A crash before the COMMIT leaves neither, so the time is still due (or missed) after the
restart. Times missed while the service was down get one catch-up run or none, as the
trigger says (models.triggers.due_times decides which times those are).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from api.store.actions import SqlActions
from api.store.backends import Conn, DuplicateKey
from api.store.connection import SqlDatabase, check_epoch, read_time, stored_time
from api.store.records import Firing, TriggerRecord
from api.store.tasks import SqlTasks
from models.errors import AlreadyExists, NotFound, SluiceError
from models.tasks import QueueSource
from models.triggers import HISTORY_KEPT, CatchUp, FiringOutcome, Trigger, due_times

_TRIGGER_COLUMNS = "seq, body, created_at, next_due"


def _run_id(trigger: Trigger, seq: int, at: datetime) -> str:
    """One run per scheduled time; `seq` keeps a re-created trigger's runs apart."""
    return f"{trigger.name}-{seq}-{at.strftime('%Y%m%dT%H%M%SZ')}"


class SqlTriggers(SqlDatabase):
    """Triggers over the actions' file: a firing inserts its run as a submission does
    (api.store.actions checks the queue's depth, draining and environments)."""

    @staticmethod
    def _fetch_trigger(conn: Conn, name: str) -> tuple[Any, ...]:
        row = conn.execute(
            f"SELECT {_TRIGGER_COLUMNS} FROM triggers WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"trigger {name!r} does not exist", field="trigger")
        return tuple(row)

    @staticmethod
    def _trigger_record(conn: Conn, row: tuple[Any, ...]) -> TriggerRecord:
        seq, body, created_at, next_due = row
        history = [
            Firing(
                scheduled_for=datetime.fromisoformat(at),
                fired_at=datetime.fromisoformat(fired),
                outcome=FiringOutcome(outcome),
                run=run,
                missed=missed,
                message=message,
            )
            for at, fired, outcome, run, missed, message in conn.execute(
                "SELECT scheduled_for, fired_at, outcome, run, missed, message"
                " FROM trigger_firings WHERE trigger_seq = ? ORDER BY scheduled_for DESC",
                (seq,),
            ).fetchall()
        ]
        return TriggerRecord(
            trigger=Trigger.model_validate_json(body),
            created_at=datetime.fromisoformat(created_at),
            next_due=read_time(next_due),
            history=history,
        )

    def create_trigger(self, trigger: Trigger, now: datetime) -> TriggerRecord:
        """A new trigger; a fixed rate counts from `now`, its first time is one period on."""
        with self._write() as conn:
            SqlActions._fetch_queue(conn, trigger.queue)
            next_due = None if trigger.paused else trigger.schedule.next_after(now, now)
            try:
                conn.execute(
                    "INSERT INTO triggers (name, queue, body, created_at, next_due)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        trigger.name,
                        trigger.queue,
                        trigger.model_dump_json(),
                        stored_time(now),
                        stored_time(next_due),
                    ),
                )
            except DuplicateKey:
                raise AlreadyExists(
                    f"trigger {trigger.name!r} already exists", field="name"
                ) from None
            return self._trigger_record(conn, self._fetch_trigger(conn, trigger.name))

    def replace_trigger(self, trigger: Trigger, now: datetime) -> TriggerRecord:
        """Store a changed trigger; its next time is planned again from now (none if paused)."""
        with self._write() as conn:
            _, _, created_at, _ = self._fetch_trigger(conn, trigger.name)
            SqlActions._fetch_queue(conn, trigger.queue)
            anchor = datetime.fromisoformat(created_at)
            next_due = None if trigger.paused else trigger.schedule.next_after(now, anchor)
            conn.execute(
                "UPDATE triggers SET queue = ?, body = ?, next_due = ? WHERE name = ?",
                (trigger.queue, trigger.model_dump_json(), stored_time(next_due), trigger.name),
            )
            return self._trigger_record(conn, self._fetch_trigger(conn, trigger.name))

    def get_trigger(self, name: str) -> TriggerRecord:
        with self._read() as conn:
            return self._trigger_record(conn, self._fetch_trigger(conn, name))

    def list_triggers(self) -> list[TriggerRecord]:
        with self._read() as conn:
            rows = conn.execute(f"SELECT {_TRIGGER_COLUMNS} FROM triggers ORDER BY name")
            return [self._trigger_record(conn, tuple(row)) for row in rows.fetchall()]

    def delete_trigger(self, name: str) -> None:
        """The trigger and its history go; the runs it submitted stay."""
        with self._write() as conn:
            seq = self._fetch_trigger(conn, name)[0]
            conn.execute("DELETE FROM trigger_firings WHERE trigger_seq = ?", (seq,))
            conn.execute("DELETE FROM triggers WHERE seq = ?", (seq,))

    def fire_triggers(
        self, now: datetime, grace: timedelta, *, epoch: int | None = None
    ) -> list[Firing]:
        """Fire every active trigger due by `now`, each in its own transaction.

        A time within `grace` of now is on time and gets its run; older ones were missed
        while the service was down: one catch-up run for the latest, or none
        (`catch_up: none`). A queue that refuses the run (draining, full, deleted) is
        written in the history as refused; the time does not fire later. Only the leader
        at `epoch` fires (api.store.leadership): each firing checks it in its transaction.
        """
        with self._read() as conn:
            due = conn.execute(
                "SELECT name FROM triggers WHERE next_due IS NOT NULL AND next_due <= ?"
                " ORDER BY next_due, name",
                (stored_time(now),),
            ).fetchall()
        fired: list[Firing] = []
        for (name,) in due:
            fired.extend(self._fire(name, now, grace, epoch))
        return fired

    def _fire(self, name: str, now: datetime, grace: timedelta, epoch: int | None) -> list[Firing]:
        with self._write() as conn:
            check_epoch(conn, epoch)
            try:
                seq, body, created_at, next_due = self._fetch_trigger(conn, name)
            except NotFound:  # deleted since the due list was read
                return []
            due_at = read_time(next_due)
            if due_at is None or due_at > now:  # paused or changed since
                return []
            trigger = Trigger.model_validate_json(body)
            anchor = datetime.fromisoformat(created_at)
            times = due_times(trigger.schedule, due_at, now, anchor, grace)
            firings: list[Firing] = []
            if times.latest_missed is not None:
                counted = f"more than {times.missed}" if times.missed_over else str(times.missed)
                if trigger.catch_up is CatchUp.NONE:
                    firings.append(
                        Firing(
                            times.latest_missed,
                            now,
                            FiringOutcome.SKIPPED,
                            None,
                            times.missed,
                            f"{counted} scheduled times passed while the service was down;"
                            " catch_up none: no run",
                        )
                    )
                else:
                    firings.append(
                        self._submit_run(
                            conn,
                            trigger,
                            seq,
                            times.latest_missed,
                            now,
                            FiringOutcome.CAUGHT_UP,
                            times.missed,
                            f"one catch-up run for {counted} scheduled times that passed"
                            " while the service was down",
                        )
                    )
            for at in times.on_time:
                firings.append(
                    self._submit_run(conn, trigger, seq, at, now, FiringOutcome.FIRED, 0, "on time")
                )
            conn.executemany(
                "INSERT INTO trigger_firings (trigger_seq, scheduled_for, fired_at, outcome,"
                " run, missed, message) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        seq,
                        stored_time(f.scheduled_for),
                        stored_time(f.fired_at),
                        f.outcome.value,
                        f.run,
                        f.missed,
                        f.message,
                    )
                    for f in firings
                ],
            )
            conn.execute(
                "DELETE FROM trigger_firings WHERE trigger_seq = ? AND scheduled_for NOT IN"
                " (SELECT scheduled_for FROM trigger_firings WHERE trigger_seq = ?"
                "  ORDER BY scheduled_for DESC LIMIT ?)",
                (seq, seq, HISTORY_KEPT),
            )
            conn.execute(
                "UPDATE triggers SET next_due = ? WHERE seq = ?",
                (stored_time(times.next_due), seq),
            )
            return firings

    def _submit_run(
        self,
        conn: Conn,
        trigger: Trigger,
        seq: int,
        at: datetime,
        now: datetime,
        outcome: FiringOutcome,
        missed: int,
        message: str,
    ) -> Firing:
        """Insert one firing's run, in a savepoint: a refusal undoes only that run."""
        run = _run_id(trigger, seq, at)
        conn.execute("SAVEPOINT firing")
        try:
            actions = trigger.run_actions(run, now)
            SqlActions._insert_actions(conn, actions)
            # The trigger's queue is its runs' queue (the seed's per-trigger routing).
            SqlTasks._record_routing(
                conn, {action.id: QueueSource.RUN for action in actions}, {run: trigger.queue}
            )
        except SluiceError as error:
            conn.execute("ROLLBACK TO firing")
            conn.execute("RELEASE firing")
            return Firing(
                at, now, FiringOutcome.REFUSED, None, missed,
                f"{error.code.value}: {error.message}",
            )  # fmt: skip
        conn.execute("RELEASE firing")
        return Firing(at, now, outcome, run, missed, message)
