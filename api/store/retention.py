"""Retention of finished actions and jobs: the oldest are deleted, their counts are kept.

A finished action (succeeded, failed, cancelled) or job (SUCCEEDED, FAILED, CANCELLED) is
deleted once it finished longer ago than the retention's age, or once newer finished ones of
its table fill its count. What /metrics counts from those tables (actions submitted, scheduled,
failed by code, queue wait; jobs' preemptions) must not go down when rows go, or every
dashboard's rate() would read a reset: each pruned row's share of those counts is added to
`retired_totals` in the transaction that deletes it, and `with_retired` (actions) and
`retired_preemptions` (jobs) add them back to the live tables' totals.

The SQL is standard (no SQLite-only functions): the waits of pruned actions are computed here.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from api.store.backends import Conn
from api.store.connection import SqlDatabase, read_time, stored_time
from api.store.records import UNSPECIFIED_CODE, ActionTotals, Retention

FINISHED_SQL = "('succeeded', 'failed', 'cancelled')"
JOBS_FINISHED_SQL = "('SUCCEEDED', 'FAILED', 'CANCELLED')"
PRUNE_BATCH = 1000  # per transaction, so a cleanup holds the writer about a tenth of a second
RETIRED_PREEMPTIONS = "job_preemptions"  # retired_totals' name for a job queue's pruned jobs'


def _wait_key(bound_s: float) -> str:
    return f"wait_le:{bound_s!r}"


def _past(
    table: str, finished: str, now: datetime, retention: Retention
) -> tuple[str, list[object]] | None:
    """The condition (and its arguments) that picks the finished rows of `table` past
    `retention`; None when it keeps every row."""
    past: list[str] = []
    args: list[object] = []
    if retention.max_age is not None:
        past.append("finished_at < ?")
        args.append(stored_time(now - retention.max_age))
    if retention.max_count is not None:
        past.append(
            f"seq NOT IN (SELECT seq FROM {table} WHERE phase IN {finished}"
            " ORDER BY finished_at DESC, seq DESC LIMIT ?)"
        )
        args.append(retention.max_count)
    if not past:
        return None
    return f"phase IN {finished} AND ({' OR '.join(past)})", args


def _oldest(
    conn: Conn, table: str, columns: str, where: tuple[str, list[object]]
) -> list[tuple[Any, ...]]:
    """`seq` and `columns` of the first PRUNE_BATCH rows of `table` that `where` picks."""
    condition, args = where
    return conn.execute(
        f"SELECT seq, {columns} FROM {table} WHERE {condition} ORDER BY seq LIMIT ?",
        (*args, PRUNE_BATCH),
    ).fetchall()


def _retire(conn: Conn, table: str, seqs: list[int], counts: dict[tuple[str, str], float]) -> None:
    """Delete the rows `seqs` of `table`, adding what they counted to `retired_totals`."""
    conn.executemany(
        "INSERT INTO retired_totals (queue, name, value) VALUES (?, ?, ?)"
        " ON CONFLICT (queue, name) DO UPDATE SET value = retired_totals.value"
        " + excluded.value",
        [(queue, name, value) for (queue, name), value in counts.items()],
    )
    conn.executemany(f"DELETE FROM {table} WHERE seq = ?", [(seq,) for seq in seqs])


class SqlRetention(SqlDatabase):
    """Pruning finished actions and jobs; their counts move to `retired_totals`."""

    def prune_finished(
        self, now: datetime, retention: Retention, wait_bounds_s: tuple[float, ...]
    ) -> int:
        """Delete up to PRUNE_BATCH finished actions past `retention`, oldest first, and
        return how many went. Their queue waits are counted at `wait_bounds_s` (the bounds
        /metrics asks `action_totals` for)."""
        where = _past("actions", FINISHED_SQL, now, retention)
        if where is None:
            return 0
        with self._write() as conn:
            rows = _oldest(conn, "actions", "queue, phase, code, submitted_at, scheduled_at", where)
            retired: defaultdict[tuple[str, str], float] = defaultdict(float)
            for _, queue, phase, code, submitted_at, scheduled_at in rows:
                retired[queue, "submitted"] += 1
                if phase == "failed":
                    retired[queue, f"failed:{code or UNSPECIFIED_CODE}"] += 1
                scheduled, submitted = read_time(scheduled_at), read_time(submitted_at)
                if scheduled is not None and submitted is not None:
                    wait_s = (scheduled - submitted).total_seconds()
                    retired[queue, "scheduled"] += 1
                    retired[queue, "wait_sum_s"] += wait_s
                    for bound in wait_bounds_s:
                        retired[queue, _wait_key(bound)] += wait_s <= bound
            _retire(conn, "actions", [row[0] for row in rows], retired)
        return len(rows)

    def prune_finished_jobs(self, now: datetime, retention: Retention) -> int:
        """Delete up to PRUNE_BATCH finished jobs past `retention` (the actions' retention,
        counted apart), oldest first, and return how many went; their preemptions stay
        counted."""
        where = _past("jobs", JOBS_FINISHED_SQL, now, retention)
        if where is None:
            return 0
        with self._write() as conn:
            rows = _oldest(conn, "jobs", "job_queue, preemptions", where)
            preempted: defaultdict[tuple[str, str], float] = defaultdict(float)
            for _, job_queue, preemptions in rows:
                if preemptions:
                    preempted[job_queue, RETIRED_PREEMPTIONS] += preemptions
            _retire(conn, "jobs", [row[0] for row in rows], preempted)
        return len(rows)


def retired_preemptions(conn: Conn) -> dict[str, int]:
    """Preemptions of pruned jobs, per job queue."""
    rows = conn.execute(
        "SELECT queue, value FROM retired_totals WHERE name = ?", (RETIRED_PREEMPTIONS,)
    )
    return {queue: int(value) for queue, value in rows}


def with_retired(
    conn: Conn, totals: dict[str, ActionTotals], wait_bounds_s: tuple[float, ...]
) -> dict[str, ActionTotals]:
    """`totals` of the actions table plus what pruned actions counted, per queue."""
    kept: dict[str, dict[str, float]] = {}
    rows = conn.execute(
        "SELECT queue, name, value FROM retired_totals WHERE name <> ?", (RETIRED_PREEMPTIONS,)
    )
    for queue, name, value in rows:
        kept.setdefault(queue, {})[name] = value
    merged = dict(totals)
    for queue, counts in kept.items():
        live = totals.get(queue, ActionTotals(wait_le=(0,) * len(wait_bounds_s)))
        failed = dict(live.failed)
        for name, value in counts.items():
            if name.startswith("failed:"):
                code = name.removeprefix("failed:")
                failed[code] = failed.get(code, 0) + int(value)
        merged[queue] = ActionTotals(
            submitted=live.submitted + int(counts.get("submitted", 0)),
            scheduled=live.scheduled + int(counts.get("scheduled", 0)),
            failed=failed,
            wait_le=tuple(
                count + int(counts.get(_wait_key(bound), 0))
                for count, bound in zip(live.wait_le, wait_bounds_s, strict=True)
            ),
            wait_sum_s=live.wait_sum_s + counts.get("wait_sum_s", 0.0),
        )
    return merged
