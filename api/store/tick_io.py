"""A tick's input and output: the snapshot read in one transaction, decisions written in one.

The snapshot holds the capped queues' state and the job queues' (api.store.job_queues),
read in the same read transaction; a tick's decisions of both kinds are applied in one
write transaction, all or none, and only if nothing the tick planned on has changed
since its snapshot (the store's generation, see `SqlTickIO.apply_tick`).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from api.store.actions import LIVE_SQL
from api.store.connection import (
    SqlDatabase,
    bump_generation,
    check_epoch,
    read_generation,
    read_time,
    stored_time,
)
from api.store.job_queues import apply_quota_decisions, read_quota_snapshot
from api.store.leadership import TickRow, record_tick
from api.store.records import (
    LIVE_PHASES,
    AppliedJobs,
    AppliedTick,
    Phase,
    SnapshotOvertaken,
    TickInput,
    TickViews,
    TickWriteBack,
)
from models.errors import ErrorCode
from models.result import TickResult
from models.scenario import validation_message
from models.snapshot import Action, ActionState, Placement, Snapshot

log = logging.getLogger("sluice.store")

REMEMBERED_MAX = 50_000

# A live action's row as the snapshot reads it: seq, id, phase, placement, started (or
# scheduled) at, queue.
ActionRow = tuple[int, str, str, str | None, str | None, str]
ROW_COLUMNS = "seq, id, phase, placement, COALESCE(started_at, scheduled_at), queue"
LIVE = frozenset(phase.value for phase in LIVE_PHASES)


@dataclass(frozen=True)
class ChangedActions:
    """What one read brought in: the snapshot's actions in order, those of them that are
    new or changed since the last read, and why each live row left out does not validate."""

    actions: list[Action]
    changed: list[Action]
    invalid: dict[str, str]


class LiveActions:
    """The live actions of the last snapshot read, kept so the next read fetches only the
    rows written since (each write stamps its row with a change number, schema 8) and parses
    only bodies it has not parsed before.

    Change numbers grow in commit order (writes are serialized on both databases), so
    the rows numbered above the highest number the last read saw are every row written
    since. What the numbers cannot show, the read checks in the same transaction, and
    reads every live row again when: nothing is kept (a new process), the database is
    another one (its `store_id`) or its numbers went back (restored from a copy), or the
    count of live rows is not what the kept rows and the changes make it (a row deleted
    after its last change was read: only finished rows are deleted, but one that finished
    and was pruned between two reads shows no change).

    An action's body changes only when it moves to another queue (its `queue` column with
    it), so a parsed form whose queue is the row's stays valid. The solver receives these
    shared objects and must not mutate them.

    Submissions are remembered (parsed already) only while fewer than REMEMBERED_MAX are:
    a process whose ticks read in a worker never reads here to prune them, and past the
    bound a new action is parsed when it is read.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads = 0  # advanced by each snapshot read
        self._submitted: dict[str, tuple[Action, int]] = {}  # queued forms, by id
        self._rows: dict[str, ActionRow] = {}  # the live rows as last read, by id
        self._actions: dict[str, Action] = {}  # their snapshot forms (the valid ones)
        self._invalid: dict[str, str] = {}  # why each live row left out does not validate
        self._ordered: list[Action] | None = []  # _actions in seq order, once sorted
        self._mark: int | None = None  # the highest change number read; None: read all
        self._store_id: str | None = None

    def remember(self, actions: list[Action]) -> None:
        with self._lock:
            for action in actions[: max(0, REMEMBERED_MAX - len(self._submitted))]:
                self._submitted[action.id] = (action, self._reads)

    def start_read(self) -> int:
        """Call before the snapshot's read transaction begins; returns the read's number."""
        with self._lock:
            self._reads += 1
            return self._reads

    def since(self, store_id: str, mark: int) -> int | None:
        """The change number above which this read need fetch rows, in a database whose
        id and highest change number are these; None: fetch every live row."""
        if self._mark is None or store_id != self._store_id or mark < self._mark:
            return None
        return self._mark

    def count_after(self, changes: list[ActionRow]) -> int:
        """How many live rows there are once `changes` (rows of any phase) are applied."""
        live = len(self._rows)
        for row in changes:
            live += (row[2] in LIVE) - (row[1] in self._rows)
        return live

    def missing(self, rows: list[ActionRow]) -> list[str]:
        """Of these rows, the ids whose body must be read: live, and not parsed with the
        row's queue."""
        with self._lock:
            missing = []
            for row in rows:
                cached = self._submitted.get(row[1])
                if row[2] in LIVE and (cached is None or cached[0].queue != row[5]):
                    missing.append(row[1])
            return missing

    def update(
        self,
        rows: list[ActionRow],
        every_row: bool,
        bodies: dict[str, str],
        read: int,
        mark: tuple[str, int],
    ) -> ChangedActions:
        """Apply one read: `rows` are every live row (`every_row`) or the rows changed since
        the last read, `bodies` those `missing` named, `mark` the database's id and highest
        change number. A placed action's started_at is when an executor said it started,
        else when it was placed.

        Parsed forms of actions that are no longer live are dropped, except those
        remembered since the read began (submitted after its transaction started)."""
        with self._lock:
            if every_row:
                live = {row[1] for row in rows}
                self._submitted = {
                    action_id: entry
                    for action_id, entry in self._submitted.items()
                    if action_id in live or entry[1] >= read
                }
                self._rows, self._actions, self._invalid = {}, {}, {}
            for action_id, body in bodies.items():
                try:
                    self._submitted[action_id] = (Action.model_validate_json(body), read)
                except ValidationError as error:
                    self._invalid[action_id] = validation_message(
                        error, f"stored action {action_id}"
                    )
            changed: list[Action] = []
            for row in rows:
                action_id = row[1]
                if row[2] not in LIVE:
                    self._rows.pop(action_id, None)
                    self._actions.pop(action_id, None)
                    self._invalid.pop(action_id, None)
                    entry = self._submitted.get(action_id)
                    if entry is not None and entry[1] < read:
                        del self._submitted[action_id]
                    continue
                self._rows[action_id] = row
                self._actions.pop(action_id, None)
                if action_id in bodies and action_id in self._invalid:
                    continue  # its body does not validate
                self._invalid.pop(action_id, None)
                try:
                    action = self._snapshot_form(row)
                except ValidationError as error:
                    where = f"stored placement of action {action_id}"
                    self._invalid[action_id] = validation_message(error, where)
                    continue
                self._actions[action_id] = action
                changed.append(action)
            if rows or every_row:
                self._ordered = None
            if self._ordered is None:
                order = sorted(self._actions, key=lambda action_id: self._rows[action_id][0])
                self._ordered = [self._actions[action_id] for action_id in order]
            self._store_id, self._mark = mark
            return ChangedActions(list(self._ordered), changed, dict(self._invalid))

    def _snapshot_form(self, row: ActionRow) -> Action:
        _, action_id, phase, placement, started, _ = row
        action = self._submitted[action_id][0]
        if phase == Phase.QUEUED:
            return action
        # Scheduled and running actions both hold their charges.
        return action.model_copy(
            update={
                "state": ActionState.RUNNING,
                "placement": Placement.model_validate_json(placement) if placement else None,
                "started_at": read_time(started),
            }
        )

    def forget(self) -> None:
        """Read every live row next time (the last read's actions did not validate)."""
        with self._lock:
            self._mark = None


class SqlTickIO(SqlDatabase):
    """Reads the snapshot a tick solves and writes its decisions back."""

    def __init__(self, path: str | Path, *, reader_only: bool = False) -> None:
        super().__init__(path, reader_only=reader_only)
        self._live_actions = LiveActions()
        # What the kept actions were last validated against (queues, clusters and
        # environments, as stored): while it holds, a read validates only the changed ones.
        self._validated_fleet: object = None
        # One snapshot read at a time: the live actions are consulted, then updated.
        self._snapshot_lock = threading.Lock()

    def read_snapshot(self, now: datetime) -> Snapshot:
        """Everything the tick needs, read in one transaction so it is consistent. An action
        row that no longer validates is left out (see `read_tick_input`)."""
        return self.read_tick_input_unchecked(now)[0].snapshot

    def read_tick_input(self, now: datetime) -> TickInput:
        """The snapshot and the generation it was read at, for `apply_tick`.

        A stored action whose row no longer validates (an old row, a hand edit, a body
        written before a bound existed) must not fail every tick: it is left out of the
        snapshot, logged at error level, and if still queued failed INFEASIBLE with the
        validation's words, so the rest of the line is scheduled. (A running one is left
        running; what it holds cannot be counted.)
        """
        planned, invalid = self.read_tick_input_unchecked(now)
        rejected = self.fail_unreadable(invalid, now)
        return TickInput(planned.snapshot, planned.generation, rejected)

    def read_tick_input_unchecked(self, now: datetime) -> tuple[TickInput, dict[str, str]]:
        """`read_tick_input` without its write: the snapshot, and why each row left out of
        it does not validate, by action id (for `fail_unreadable`). What a reader-only
        store (the tick's worker) reads."""
        with self._snapshot_lock:
            return self._read_tick_input(now)

    def fail_unreadable(self, invalid: dict[str, str], now: datetime) -> int:
        """Log each unreadable row and fail it INFEASIBLE with the validation's words if it
        is still queued; returns how many were failed."""
        for why in invalid.values():
            log.error("%s; it is left out of the tick", why)
        rejected = 0
        if invalid:
            with self._write() as conn:
                for action_id, why in invalid.items():
                    rejected += conn.execute(
                        "UPDATE actions SET phase = 'failed', code = ?, message = ?,"
                        " finished_at = ? WHERE id = ? AND phase = 'queued'",
                        (ErrorCode.INFEASIBLE.value, why, stored_time(now), action_id),
                    ).rowcount
        return rejected

    def _read_tick_input(self, now: datetime) -> tuple[TickInput, dict[str, str]]:
        kept = self._live_actions
        read = kept.start_read()
        with self._read() as conn:
            generation = read_generation(conn)
            (settings,) = conn.execute("SELECT body FROM settings").fetchone()
            queue_rows = conn.execute(
                "SELECT body, head_blocked_since FROM queues ORDER BY name"
            ).fetchall()
            cluster_rows = conn.execute("SELECT body FROM clusters ORDER BY name").fetchall()
            environment_rows = conn.execute(
                "SELECT body, running, placement FROM environments ORDER BY name"
            ).fetchall()
            store_id, mark = conn.execute(
                "SELECT (SELECT value FROM meta WHERE key = 'store_id'),"
                " (SELECT COALESCE(MAX(changed), 0) FROM actions)"
            ).fetchone()
            since = kept.since(store_id, mark)
            rows: list[ActionRow] = []
            if since is not None:
                rows = conn.execute(
                    f"SELECT {ROW_COLUMNS} FROM actions WHERE changed > ?", (since,)
                ).fetchall()
                (live,) = conn.execute(
                    f"SELECT COUNT(*) FROM actions WHERE phase IN {LIVE_SQL}"
                ).fetchone()
                if kept.count_after(rows) != live:
                    since = None
            if since is None:
                rows = conn.execute(
                    f"SELECT {ROW_COLUMNS} FROM actions WHERE phase IN {LIVE_SQL}"
                ).fetchall()
            quota = read_quota_snapshot(conn)  # the job queues, in the same transaction
            missing = kept.missing(rows)
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
        read_in = kept.update(rows, since is None, bodies, read, (store_id, mark))
        # What an action's checks look at (models.snapshot.Snapshot): queue names, clusters,
        # environments; a queue's blocked head, which every tick writes, is not among them.
        fleet = ([body for body, _ in queue_rows], cluster_rows, environment_rows)
        # Until validated, as if nothing had been: a failed read must not leave unchecked
        # actions behind for the next read to take as checked.
        validated, self._validated_fleet = self._validated_fleet, None
        every_action = since is None or validated != fleet
        fields = {
            "now": now,
            "settings": json.loads(settings),
            "queues": queues,
            "clusters": [json.loads(body) for (body,) in cluster_rows],
            "environments": environments,
            "actions": read_in.actions if every_action else read_in.changed,
            **quota,
        }
        try:
            snapshot = Snapshot.model_validate(fields)
        except Exception:
            kept.forget()
            raise
        if not every_action:
            # The others were validated against this same fleet by an earlier read.
            snapshot = snapshot.model_copy(update={"actions": read_in.actions})
        self._validated_fleet = fleet
        return TickInput(snapshot=snapshot, generation=generation), read_in.invalid

    def apply_tick(
        self,
        tick: TickResult | TickWriteBack,
        generation: int,
        *,
        epoch: int | None = None,
        views: TickViews | None = None,
    ) -> AppliedTick:
        """Write a tick's decisions back in one transaction: all of them or none.

        A decision applies only to an action still queued: one cancelled while the
        tick ran stays cancelled, and no action is ever scheduled twice.

        The whole tick is refused (`SnapshotOvertaken`) unless the store is still at the
        `generation` its snapshot was read at, checked in this same transaction, so no
        interleaving of ticks and changes can exceed a cap or a node. Every write-back
        moves the generation on (a tick planned beside it would charge the same room
        twice), and so does every change of configuration: settings, queues (created,
        changed, drained, deleted), clusters, environment definitions, scheduling
        policies, service environments and job queues, since a lowered cap, a shrunk
        cluster or a resized pool can make planned admissions overrun. Submissions,
        cancellations, executor reports and environment stops leave it alone: they only
        add work the tick did not plan on (and does not touch) or free room it did not
        use, and the per-action checks below cover the decisions on actions they end.

        Before all that, the tick's leader must still hold the lease at `epoch`
        (api.store.leadership; `LeaseLost` if another replica took it). The tick is kept
        as the last tick, numbered, in the same transaction, with its result and `views`
        where other replicas read them (`shared`).

        `tick`: the result, or the write-back its solving process made of it (what the
        service passes, so this process dumps no placement and no result text).
        """
        write = tick if isinstance(tick, TickWriteBack) else TickWriteBack.of(tick)
        result, rows = write.summary, write.rows
        shown = TickRow.of(write.text, views or TickViews()) if self.shared else None
        now = stored_time(result.now)
        stale: list[str] = []
        scheduled = failed = started = 0
        with self._write() as conn:
            check_epoch(conn, epoch)
            current = read_generation(conn)
            if current != generation:
                raise SnapshotOvertaken(
                    f"the tick planned on generation {generation} of the store, which is now"
                    f" at {current}: its decisions were not applied; the next tick re-plans"
                )
            bump_generation(conn)
            for environment, cluster, placement_json in rows.environments_started:
                started += conn.execute(
                    "UPDATE environments SET running = 1, placement = ?, cluster = ?"
                    " WHERE name = ? AND running = 0",
                    (placement_json, cluster, environment),
                ).rowcount
            for action_id, placed_in, placed_json, joined in rows.scheduled:
                if joined is not None:
                    # Joining a pool: the pool must be up, or the action stays queued.
                    row = conn.execute(
                        "SELECT running FROM environments WHERE name = ?", (joined,)
                    ).fetchone()
                    if not row or not row[0]:
                        stale.append(action_id)
                        continue
                changed = conn.execute(
                    "UPDATE actions SET phase = 'scheduled', placement = ?, cluster = ?,"
                    " scheduled_at = ? WHERE id = ? AND phase = 'queued'",
                    (placed_json, placed_in, now, action_id),
                ).rowcount
                scheduled += changed
                if not changed:
                    stale.append(action_id)
            for action_id, code, message in rows.failed:
                changed = conn.execute(
                    "UPDATE actions SET phase = 'failed', code = ?, message = ?, finished_at = ?"
                    " WHERE id = ? AND phase = 'queued'",
                    (code.value, message, now, action_id),
                ).rowcount
                failed += changed
                if not changed:
                    stale.append(action_id)
            conn.executemany(
                "UPDATE queues SET head_blocked_since = ? WHERE name = ?",
                [
                    (
                        stored_time(metrics.head_blocked_since) if metrics.head_blocked else None,
                        name,
                    )
                    for name, metrics in result.queues.items()
                ],
            )
            jobs = apply_quota_decisions(conn, result.quota) if result.quota else AppliedJobs()
            number = record_tick(conn, epoch, shown)
        return AppliedTick(
            number=number,
            scheduled=scheduled,
            failed=failed,
            environments_started=started,
            stale=stale,
            jobs=jobs,
        )
