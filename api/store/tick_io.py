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
    AppliedJobs,
    AppliedTick,
    Phase,
    SnapshotOvertaken,
    TickInput,
    TickViews,
)
from models.errors import ErrorCode
from models.result import TickResult
from models.scenario import validation_message
from models.snapshot import Action, ActionState, Placement, Snapshot

log = logging.getLogger("sluice.store")

REMEMBERED_MAX = 50_000


class ActionCache:
    """Validated actions by id, so a tick does not parse thousands of JSON bodies again.

    An action's body changes only when it moves to another queue (its `queue` column with
    it), and its placement never changes once set, so a parsed form whose queue is the
    row's stays valid: a reader in another process (the tick's worker), which hears of no
    move, checks the queue and reads a moved action again. The solver receives these shared
    objects and must not mutate them.

    Submissions are remembered (parsed already) only while the cache holds fewer than
    REMEMBERED_MAX actions: a process whose ticks read in a worker never reads here to
    prune them, and past the bound a new action is parsed when it is read.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads = 0  # advanced by each snapshot read
        self._submitted: dict[str, tuple[Action, int]] = {}
        self._placed: dict[str, Action] = {}  # the running form, with state and placement

    def remember(self, actions: list[Action]) -> None:
        with self._lock:
            for action in actions[: max(0, REMEMBERED_MAX - len(self._submitted))]:
                self._submitted[action.id] = (action, self._reads)

    def start_read(self) -> int:
        """Call before the snapshot's read transaction begins; returns the read's number."""
        with self._lock:
            self._reads += 1
            return self._reads

    def missing(self, rows: list[tuple[str, str]]) -> list[str]:
        """Of rows of (id, queue), the ids not cached, or cached with another queue."""
        with self._lock:
            missing = []
            for action_id, queue in rows:
                cached = self._submitted.get(action_id)
                if cached is None or cached[0].queue != queue:
                    missing.append(action_id)
            return missing

    def live(
        self,
        rows: list[tuple[str, str, str | None, str | None]],
        bodies: dict[str, str],
        read: int,
    ) -> tuple[list[Action], dict[str, str]]:
        """The snapshot's actions for rows of (id, phase, placement, started), in order, and
        why each row whose body (or placement) does not validate is left out, by id. A placed
        action's started_at is when an executor said it started, else when it was placed.

        Entries of actions that are no longer live are dropped, except those
        remembered since the read began (submitted after its transaction started).
        """
        with self._lock:
            invalid: dict[str, str] = {}
            for action_id, body in bodies.items():
                try:
                    self._submitted[action_id] = (Action.model_validate_json(body), read)
                except ValidationError as error:
                    invalid[action_id] = validation_message(error, f"stored action {action_id}")
            actions: list[Action] = []
            placed: dict[str, Action] = {}
            for action_id, phase, placement, started in rows:
                if action_id in invalid:
                    continue
                action = self._submitted[action_id][0]
                if phase != Phase.QUEUED:
                    # Scheduled and running actions both hold their charges.
                    started_at = read_time(started)
                    cached = self._placed.get(action_id)
                    try:
                        action = (
                            cached
                            if cached is not None and cached.started_at == started_at
                            else action.model_copy(
                                update={
                                    "state": ActionState.RUNNING,
                                    "placement": Placement.model_validate_json(placement)
                                    if placement
                                    else None,
                                    "started_at": started_at,
                                }
                            )
                        )
                    except ValidationError as error:
                        where = f"stored placement of action {action_id}"
                        invalid[action_id] = validation_message(error, where)
                        continue
                    placed[action_id] = action
                actions.append(action)
            live = {row[0] for row in rows}
            self._submitted = {
                action_id: entry
                for action_id, entry in self._submitted.items()
                if action_id in live or entry[1] >= read
            }
            self._placed = placed
            return actions, invalid


class SqlTickIO(SqlDatabase):
    """Reads the snapshot a tick solves and writes its decisions back."""

    def __init__(self, path: str | Path, *, reader_only: bool = False) -> None:
        super().__init__(path, reader_only=reader_only)
        self._action_cache = ActionCache()
        # One snapshot read at a time: the action cache is consulted, then pruned.
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
        read = self._action_cache.start_read()
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
            rows = conn.execute(
                "SELECT id, phase, placement, COALESCE(started_at, scheduled_at), queue"
                f" FROM actions WHERE phase IN {LIVE_SQL} ORDER BY seq"
            ).fetchall()
            quota = read_quota_snapshot(conn)  # the job queues, in the same transaction
            missing = self._action_cache.missing([(row[0], row[4]) for row in rows])
            action_rows = [row[:4] for row in rows]
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
        actions, invalid = self._action_cache.live(action_rows, bodies, read)
        snapshot = Snapshot.model_validate(
            {
                "now": now,
                "settings": json.loads(settings),
                "queues": queues,
                "clusters": [json.loads(body) for (body,) in cluster_rows],
                "environments": environments,
                "actions": actions,
                **quota,
            }
        )
        return TickInput(snapshot=snapshot, generation=generation), invalid

    def apply_tick(
        self,
        result: TickResult,
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
        """
        shown = TickRow.of(result, views or TickViews()) if self.shared else None
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
            for start in result.environments_started:
                placement = start.placement()
                started += conn.execute(
                    "UPDATE environments SET running = 1, placement = ?, cluster = ?"
                    " WHERE name = ? AND running = 0",
                    (placement.model_dump_json(), start.cluster, start.environment),
                ).rowcount
            for decision in result.scheduled:
                placement_json = cluster = None
                placed = decision.placement()
                if placed is not None:
                    cluster = placed.cluster
                    placement_json = placed.model_dump_json()
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
