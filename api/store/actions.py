"""The capped queues' state: settings, queues, clusters, reusable environments and actions.

Domain objects are stored as the JSON of their pydantic models; the columns beside
them are only what queries filter or order on (and what the tick writes: a queue's
head_blocked_since, an environment's running and placement).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from api.store.backends import Conn, DuplicateKey
from api.store.connection import (
    SqlDatabase,
    bump_generation,
    check_epoch,
    read_page,
    read_time,
    stored_time,
)
from api.store.records import (
    FIRST_PAGE,
    UNSPECIFIED_CODE,
    ActionRecord,
    ActionTotals,
    EnvironmentRecord,
    Listing,
    Page,
    Phase,
    QueueCounts,
    QueueRecord,
    ReportedOutcome,
)
from api.store.retention import with_retired
from models.errors import (
    AlreadyExists,
    ErrorCode,
    FailedPrecondition,
    InvalidInput,
    NotFound,
    QueueDraining,
    ResourceExhausted,
)
from models.forecast import LEARNED_WINDOW, FinishedRun
from models.snapshot import (
    DEFAULT_QUEUE,
    Action,
    Cluster,
    Environment,
    Placement,
    Queue,
    Settings,
    Snapshot,
)
from models.tasks import QueueSource

LIVE_SQL = "('queued', 'scheduled', 'running')"  # records.LIVE_PHASES, as SQL


def queue_body(queue: Queue) -> str:
    # head_blocked_since has its own column: the tick writes it, people write the rest.
    return queue.model_dump_json(exclude={"head_blocked_since"})


def _environment_body(environment: Environment) -> str:
    return environment.model_dump_json(exclude={"running", "placement"})


class SqlActions(SqlDatabase):
    """Settings, queues, clusters, environments and actions over one SQLite file."""

    # -- settings ------------------------------------------------------------------------------

    def get_settings(self) -> Settings:
        with self._read() as conn:
            (body,) = conn.execute("SELECT body FROM settings").fetchone()
        return Settings.model_validate_json(body)

    def put_settings(self, settings: Settings) -> None:
        with self._write() as conn:
            conn.execute("UPDATE settings SET body = ?", (settings.model_dump_json(),))
            bump_generation(conn)

    # -- queues --------------------------------------------------------------------------------

    @staticmethod
    def _queue_record(row: tuple[str, int, str | None]) -> QueueRecord:
        body, draining, blocked = row
        queue = Queue.model_validate_json(body)
        if blocked is not None:
            queue = queue.model_copy(update={"head_blocked_since": read_time(blocked)})
        return QueueRecord(queue=queue, draining=bool(draining))

    @staticmethod
    def _fetch_queue(conn: Conn, name: str) -> QueueRecord:
        row = conn.execute(
            "SELECT body, draining, head_blocked_since FROM queues WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"queue {name!r} does not exist", field="queue")
        return SqlActions._queue_record(row)

    @staticmethod
    def _check_routes(conn: Conn, queue: Queue) -> None:
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
                    (queue.name, queue_body(queue)),
                )
            except DuplicateKey:
                raise AlreadyExists(f"queue {queue.name!r} already exists", field="name") from None
            bump_generation(conn)
        return QueueRecord(queue=queue, draining=False)

    def update_queue(self, name: str, changes: dict[str, Any]) -> QueueRecord:
        """Apply `changes` (field -> new value, in the JSON spelling) to queue `name`."""
        with self._write() as conn:
            current = self._fetch_queue(conn, name)
            data = json.loads(queue_body(current.queue))
            data.update(changes)
            queue = Queue.model_validate(data)
            self._check_routes(conn, queue)
            conn.execute("UPDATE queues SET body = ? WHERE name = ?", (queue_body(queue), name))
            bump_generation(conn)
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
            bump_generation(conn)
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
                f"SELECT COUNT(*) FROM actions WHERE queue = ? AND phase IN {LIVE_SQL}", (name,)
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
            bump_generation(conn)

    def queue_counts(self, queue: str | None = None) -> dict[str, QueueCounts]:
        """Live actions per queue (of one queue, when named)."""
        sql = f"SELECT queue, phase, COUNT(*) FROM actions WHERE phase IN {LIVE_SQL}"
        args: tuple[str, ...] = ()
        if queue is not None:
            sql, args = sql + " AND queue = ?", (queue,)
        with self._read() as conn:
            rows = conn.execute(sql + " GROUP BY queue, phase", args).fetchall()
        tallies: dict[str, dict[str, int]] = {}
        for queue, phase, count in rows:
            tallies.setdefault(queue, {})[phase] = count
        return {queue: QueueCounts(**tally) for queue, tally in tallies.items()}

    def action_totals(self, bounds_s: tuple[float, ...]) -> dict[str, ActionTotals]:
        """Per queue: actions submitted, scheduled and failed (by code), and how long the
        scheduled ones waited, bucketed at `bounds_s`; one scan of the table, plus what
        the finished actions pruned from it counted (api.store.retention)."""
        with self._read() as conn:
            dialect = conn.dialect
            wait = f"({dialect.seconds('scheduled_at')} - {dialect.seconds('submitted_at')})"
            buckets = "".join(
                f", CAST(COALESCE(SUM(CASE WHEN {wait} <= ? THEN 1 ELSE 0 END), 0) AS INTEGER)"
                for _ in bounds_s
            )
            rows = conn.execute(
                "SELECT queue, COUNT(*), COUNT(scheduled_at),"
                f" CAST(COALESCE(SUM({wait}), 0.0) AS REAL){buckets} FROM actions GROUP BY queue",
                bounds_s,
            ).fetchall()
            failures = conn.execute(
                "SELECT queue, COALESCE(code, ?), COUNT(*) FROM actions WHERE phase = 'failed'"
                " GROUP BY queue, code",
                (UNSPECIFIED_CODE,),
            ).fetchall()
            failed: dict[str, dict[str, int]] = {}
            for queue, code, count in failures:
                failed.setdefault(queue, {})[code] = count
            live = {
                queue: ActionTotals(
                    submitted=submitted,
                    scheduled=scheduled,
                    failed=failed.get(queue, {}),
                    wait_le=tuple(wait_le),
                    wait_sum_s=wait_sum_s,
                )
                for queue, submitted, scheduled, wait_sum_s, *wait_le in rows
            }
            return with_retired(conn, live, bounds_s)

    # -- clusters ------------------------------------------------------------------------------

    @staticmethod
    def _check_placements_fit(conn: Conn, cluster: Cluster) -> None:
        """Refuse a cluster change that would strand a placed action or pool."""
        pools = {pool.name: pool for pool in cluster.node_pools}
        rows = conn.execute(
            f"SELECT id, placement FROM actions WHERE cluster = ? AND phase IN {LIVE_SQL}"
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
            bump_generation(conn)

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
            bump_generation(conn)

    # -- environments --------------------------------------------------------------------------

    _ENVIRONMENT_COLUMNS = "body, running, placement, idle_timeout_s"

    @staticmethod
    def _environment_record(row: tuple[str, int, str | None, float | None]) -> EnvironmentRecord:
        body, running, placement, idle_timeout_s = row
        data = json.loads(body)
        data["running"] = bool(running)
        data["placement"] = json.loads(placement) if placement else None
        return EnvironmentRecord(
            environment=Environment.model_validate(data),
            idle_timeout=None if idle_timeout_s is None else timedelta(seconds=idle_timeout_s),
        )

    def put_environment(
        self, environment: Environment, idle_timeout: timedelta | None = None
    ) -> EnvironmentRecord:
        """Define or resize a reusable pool; a running pool keeps its size until it stops.
        With `idle_timeout`, the service stops it after that long without a live action."""
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
                    f"SELECT COUNT(*) FROM actions WHERE environment = ? AND phase IN {LIVE_SQL}",
                    (environment.name,),
                ).fetchone()
                if live:
                    raise FailedPrecondition(
                        f"environment {environment.name} has {live} live actions on queue"
                        f" {row[0]}; it cannot move to queue {environment.queue} now",
                        field="queue",
                    )
            conn.execute(
                "INSERT INTO environments (name, queue, body, idle_timeout_s) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, body = excluded.body,"
                " idle_timeout_s = excluded.idle_timeout_s",
                (
                    environment.name,
                    environment.queue,
                    _environment_body(environment),
                    None if idle_timeout is None else idle_timeout.total_seconds(),
                ),
            )
            bump_generation(conn)
        return EnvironmentRecord(
            environment=environment.model_copy(update={"running": False}),
            idle_timeout=idle_timeout,
        )

    def get_environment(self, name: str) -> EnvironmentRecord:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {self._ENVIRONMENT_COLUMNS} FROM environments WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise NotFound(f"environment {name!r} does not exist", field="environment")
        return self._environment_record(row)

    def list_environments(self) -> list[EnvironmentRecord]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {self._ENVIRONMENT_COLUMNS} FROM environments ORDER BY name"
            ).fetchall()
        return [self._environment_record(row) for row in rows]

    def stop_environment(self, name: str) -> EnvironmentRecord:
        """The pool's containers shut down: its charges are freed."""
        with self._write() as conn:
            row = conn.execute(
                f"SELECT {self._ENVIRONMENT_COLUMNS} FROM environments WHERE name = ?", (name,)
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
        return self._environment_record((row[0], 0, None, row[3]))

    def stop_idle_environments(self, now: datetime, *, epoch: int | None = None) -> list[str]:
        """Stop every running pool whose idle_timeout has passed since its last action
        finished, with none scheduled or running since: its charges are freed, and the next
        action starts it cold (it must fit the caps again). Executors see it stopped. Only
        the leader at `epoch` does this (api.store.leadership)."""
        stopped = []
        with self._write() as conn:
            check_epoch(conn, epoch)
            for name, idle_timeout_s in conn.execute(
                "SELECT name, idle_timeout_s FROM environments"
                " WHERE running = 1 AND idle_timeout_s IS NOT NULL ORDER BY name"
            ).fetchall():
                idle_timeout = timedelta(seconds=idle_timeout_s)
                live, last = conn.execute(
                    "SELECT COUNT(CASE WHEN phase IN ('scheduled', 'running') THEN 1 END),"
                    " MAX(finished_at)"
                    " FROM actions WHERE environment = ?",
                    (name,),
                ).fetchone()
                idle_since = read_time(last)
                if live or idle_since is None or now - idle_since < idle_timeout:
                    continue
                conn.execute(
                    "UPDATE environments SET running = 0, placement = NULL, cluster = NULL"
                    " WHERE name = ?",
                    (name,),
                )
                stopped.append(name)
            if stopped:
                bump_generation(conn)  # a tick planned on a running pool must not apply
        return stopped

    # -- actions -------------------------------------------------------------------------------

    @staticmethod
    def _insert_actions(conn: Conn, actions: list[Action]) -> None:
        """Check and insert one submission; api.store.sql_store's group commit calls this inside
        the submission's savepoint, so a refusal undoes only this submission."""
        queues: dict[str, QueueRecord] = {}
        for action in actions:
            if action.queue not in queues:
                queues[action.queue] = SqlActions._fetch_queue(conn, action.queue)
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
                f"SELECT COUNT(*) FROM actions WHERE queue = ? AND phase IN {LIVE_SQL}", (name,)
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
        ids = [action.id for action in actions]
        taken = [action_id for action_id in ids if ids.count(action_id) > 1]
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            taken += [
                row[0]
                for row in conn.execute(
                    f"SELECT id FROM actions WHERE id IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
            ]
        if taken:
            raise AlreadyExists(
                f"action {taken[0]!r} already exists (ids must be unique)", field="id"
            )
        conn.executemany(
            "INSERT INTO actions (id, queue, phase, body, environment, submitted_at,"
            " deadline_at) VALUES (?, ?, 'queued', ?, ?, ?, ?)",
            [
                (
                    action.id,
                    action.queue,
                    action.model_dump_json(exclude={"state", "placement"}),
                    action.environment,
                    stored_time(action.submitted_at),
                    stored_time(action.deadline_at()),
                )
                for action in actions
            ],
        )

    _ACTION_COLUMNS = (
        "body, phase, placement, code, message, scheduled_at, started_at, finished_at, queue_source"
    )

    @staticmethod
    def _action_record(row: tuple[Any, ...]) -> ActionRecord:
        body, phase, placement, code, message, scheduled_at, started_at, finished_at, source = row
        return ActionRecord(
            action=Action.model_validate_json(body),
            phase=Phase(phase),
            placement=Placement.model_validate_json(placement) if placement else None,
            code=ErrorCode(code) if code else None,
            message=message,
            scheduled_at=read_time(scheduled_at),
            started_at=read_time(started_at),
            finished_at=read_time(finished_at),
            queue_source=QueueSource(source) if source else None,
        )

    def _fetch_action(self, conn: Conn, action_id: str) -> ActionRecord:
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
        run: str | None = None,
        listing: Listing = FIRST_PAGE,
    ) -> Page[ActionRecord]:
        """A page of actions in arrival order, filtered; executors poll `phase=scheduled`."""
        with self._read() as conn:
            filters: list[tuple[str, object]] = [
                ("queue = ?", queue),
                ("phase = ?", None if phase is None else phase.value),
                ("cluster = ?", cluster),
                # a run defaults to the id
                (f"COALESCE({conn.dialect.json_text('body', 'run')}, id) = ?", run),
            ]
            rows, next_after = read_page(
                conn, f"SELECT seq, {self._ACTION_COLUMNS} FROM actions", filters, listing
            )
        return Page([self._action_record(row) for row in rows], next_after)

    def cancel_action(self, action_id: str, now: datetime) -> ActionRecord:
        with self._write() as conn:
            record = self._fetch_action(conn, action_id)
            if not record.phase.live:
                raise FailedPrecondition(
                    f"action {action_id} already finished ({record.phase.value})", field="action"
                )
            conn.execute(
                "UPDATE actions SET phase = 'cancelled', finished_at = ? WHERE id = ?",
                (stored_time(now), action_id),
            )
            return self._fetch_action(conn, action_id)

    def report(
        self,
        action_id: str,
        outcome: ReportedOutcome,
        now: datetime,
        code: ErrorCode | None = None,
        message: str | None = None,
    ) -> ActionRecord:
        """An executor's word on a scheduled action; finishing frees its charges."""
        if outcome is ReportedOutcome.STARTING:
            raise InvalidInput(
                "an action has no starting phase: report started once it runs",
                field="outcome",
            )
        with self._write() as conn:
            record = self._fetch_action(conn, action_id)
            if record.code is ErrorCode.DEADLINE_EXCEEDED and record.phase is Phase.FAILED:
                if outcome is ReportedOutcome.FAILED:
                    return record  # the executor acknowledges: it stopped the action
                raise FailedPrecondition(
                    f"action {action_id} failed DEADLINE_EXCEEDED: {record.message}; stop it"
                    " and report failed to acknowledge",
                    field="action",
                )
            allowed = (
                (Phase.SCHEDULED,)
                if outcome is ReportedOutcome.STARTED
                else (Phase.SCHEDULED, Phase.RUNNING)
            )
            if record.phase not in allowed:
                raise FailedPrecondition(
                    f"action {action_id} is {record.phase.value}; only"
                    f" {' or '.join(p.value for p in allowed)} actions can be reported"
                    f" {outcome.value}",
                    field="action",
                )
            if outcome is ReportedOutcome.STARTED:
                conn.execute(
                    "UPDATE actions SET phase = 'running', started_at = ? WHERE id = ?",
                    (stored_time(now), action_id),
                )
            elif outcome is ReportedOutcome.SUCCEEDED:
                conn.execute(
                    "UPDATE actions SET phase = 'succeeded', finished_at = ? WHERE id = ?",
                    (stored_time(now), action_id),
                )
            else:
                conn.execute(
                    "UPDATE actions SET phase = 'failed', code = ?, message = ?, finished_at = ?"
                    " WHERE id = ?",
                    (
                        code.value if code else None,
                        message or "the executor reported a failure",
                        stored_time(now),
                        action_id,
                    ),
                )
            return self._fetch_action(conn, action_id)

    def finished_runs(self) -> list[FinishedRun]:
        """Per queue, its last LEARNED_WINDOW succeeded actions by submission, newest first:
        what forecasts learn run times from (models.forecast). Each queue's read walks the
        (queue, phase) index backwards, so the cost does not grow with the history."""
        runs: list[FinishedRun] = []
        with self._read() as conn:
            queues = [name for (name,) in conn.execute("SELECT name FROM queues ORDER BY name")]
            task_field = conn.dialect.json_text("body", "task")
            for queue in queues:
                rows = conn.execute(
                    f"SELECT {task_field}, COALESCE(started_at, scheduled_at),"
                    " finished_at FROM actions WHERE queue = ? AND phase = 'succeeded'"
                    " ORDER BY seq DESC LIMIT ?",
                    (queue, LEARNED_WINDOW),
                ).fetchall()
                for task, started, finished in rows:
                    start, end = read_time(started), read_time(finished)
                    if start is not None and end is not None and end > start:
                        runs.append(FinishedRun(queue, task, (end - start).total_seconds()))
        return runs

    def expire_deadlines(self, now: datetime, *, epoch: int | None = None) -> list[str]:
        """Fail every scheduled or running action whose deadline has come: DEADLINE_EXCEEDED,
        its charges freed at once. Its executor learns it from the action's state (a report
        `failed` acknowledges; any other report is refused). Queued actions are the tick's:
        it fails those whose deadline passed while they waited. Only the leader at `epoch`
        does this (api.store.leadership)."""
        with self._write() as conn:
            check_epoch(conn, epoch)
            rows = conn.execute(
                "SELECT id, phase, deadline_at FROM actions WHERE deadline_at <= ?"
                " AND phase IN ('scheduled', 'running') ORDER BY seq",
                (stored_time(now),),
            ).fetchall()
            conn.executemany(
                "UPDATE actions SET phase = 'failed', code = ?, message = ?, finished_at = ?"
                " WHERE id = ?",
                [
                    (
                        ErrorCode.DEADLINE_EXCEEDED.value,
                        f"action {action_id}: deadline {deadline} passed while {phase};"
                        " its executor must stop it",
                        stored_time(now),
                        action_id,
                    )
                    for action_id, phase, deadline in rows
                ],
            )
        return [action_id for action_id, _, _ in rows]

    # -- moving waiting actions ----------------------------------------------------------------

    def move_actions(
        self,
        to: str,
        now: datetime,
        check: Callable[[set[str], Snapshot], None],
        *,
        ids: list[str] | None = None,
        source: str | None = None,
        where: Callable[[Action], bool] | None = None,
    ) -> list[ActionRecord]:
        """Move queued actions to queue `to`, all or none, keeping their arrival order.

        The actions are `ids`, or the queued actions of queue `source` that `where` keeps.
        `check` sees their source queues and a snapshot of the destination (its settings,
        the clusters, the moved actions queued there) inside the transaction, and raises
        to refuse (rights, feasibility). A destination that is draining, or whose depth the
        move would pass, refuses as a submission would.
        """
        with self._write() as conn:
            destination = self._fetch_queue(conn, to)
            if ids is not None:
                records = self._movable_by_id(conn, ids)
            else:
                assert source is not None
                self._fetch_queue(conn, source)
                rows = conn.execute(
                    f"SELECT {self._ACTION_COLUMNS} FROM actions"
                    " WHERE queue = ? AND phase = 'queued' ORDER BY seq",
                    (source,),
                ).fetchall()
                records = [self._action_record(row) for row in rows]
                records = [r for r in records if where is None or where(r.action)]
            for record in records:
                action = record.action
                if action.queue == to:
                    raise FailedPrecondition(f"action {action.id} is in queue {to} already")
                if action.environment is not None:
                    raise FailedPrecondition(
                        f"action {action.id} runs in environment {action.environment} of queue"
                        f" {action.queue}; it cannot move to another queue",
                        field="action",
                    )
            if not records:
                return []
            if destination.draining:
                raise QueueDraining(f"queue {to} is draining: it accepts nothing new")
            if destination.queue.depth is not None:
                (used,) = conn.execute(
                    f"SELECT COUNT(*) FROM actions WHERE queue = ? AND phase IN {LIVE_SQL}", (to,)
                ).fetchone()
                if used + len(records) > destination.queue.depth:
                    raise ResourceExhausted(
                        f"queue {to} is full: depth {destination.queue.depth}, {used} in flight"
                        f" or waiting, {len(records)} more moved",
                        field="to",
                    )
            moved = [r.action.model_copy(update={"queue": to}) for r in records]
            (settings,) = conn.execute("SELECT body FROM settings").fetchone()
            clusters = conn.execute("SELECT body FROM clusters ORDER BY name").fetchall()
            check(
                {r.action.queue for r in records},
                Snapshot(
                    now=now,
                    settings=Settings.model_validate_json(settings),
                    queues=[destination.queue],
                    clusters=[Cluster.model_validate_json(body) for (body,) in clusters],
                    actions=moved,
                ),
            )
            conn.executemany(
                "UPDATE actions SET queue = ?, body = ? WHERE id = ?",
                [
                    (to, action.model_dump_json(exclude={"state", "placement"}), action.id)
                    for action in moved
                ],
            )
            bump_generation(conn)  # a tick planned on the old queues must not apply
            return [self._fetch_action(conn, action.id) for action in moved]

    def _movable_by_id(self, conn: Conn, ids: list[str]) -> list[ActionRecord]:
        """The queued actions `ids`, in arrival order; refused if one is not waiting."""
        records: list[tuple[int, ActionRecord]] = []
        for action_id in dict.fromkeys(ids):
            row = conn.execute(
                f"SELECT seq, {self._ACTION_COLUMNS} FROM actions WHERE id = ?", (action_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"action {action_id!r} does not exist", field="action")
            record = self._action_record(row[1:])
            if record.phase is not Phase.QUEUED:
                raise FailedPrecondition(
                    f"action {action_id} is {record.phase.value}; only waiting (queued) actions"
                    " move",
                    field="action",
                )
            records.append((row[0], record))
        return [record for _, record in sorted(records, key=lambda pair: pair[0])]
