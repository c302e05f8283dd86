"""Retention of finished actions: the oldest are deleted, their counts are kept.

A finished action (succeeded, failed, cancelled) is deleted once it finished longer ago than
the retention's age, or once newer finished actions fill its count. What /metrics counts from
the actions table (submitted, scheduled, failed by code, queue wait) must not go down when rows
go, or every dashboard's rate() would read a reset: each pruned action's share of those counts
is added to `retired_totals` in the transaction that deletes it, and `with_retired` adds them
back to the live table's totals.

The SQL is standard (no SQLite-only functions): the waits of pruned actions are computed here.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from api.store.backends import Conn
from api.store.connection import SqlDatabase, read_time, stored_time
from api.store.records import UNSPECIFIED_CODE, ActionTotals, Retention

FINISHED_SQL = "('succeeded', 'failed', 'cancelled')"
PRUNE_BATCH = 1000  # per transaction, so a cleanup holds the writer about a tenth of a second


def _wait_key(bound_s: float) -> str:
    return f"wait_le:{bound_s!r}"


class SqlRetention(SqlDatabase):
    """Pruning finished actions; their counts move to `retired_totals`."""

    def prune_finished(
        self, now: datetime, retention: Retention, wait_bounds_s: tuple[float, ...]
    ) -> int:
        """Delete up to PRUNE_BATCH finished actions past `retention`, oldest first, and
        return how many went. Their queue waits are counted at `wait_bounds_s` (the bounds
        /metrics asks `action_totals` for)."""
        past: list[str] = []
        args: list[object] = []
        if retention.max_age is not None:
            past.append("finished_at < ?")
            args.append(stored_time(now - retention.max_age))
        if retention.max_count is not None:
            past.append(
                "seq NOT IN (SELECT seq FROM actions WHERE phase IN"
                f" {FINISHED_SQL} ORDER BY finished_at DESC, seq DESC LIMIT ?)"
            )
            args.append(retention.max_count)
        if not past:
            return 0
        with self._write() as conn:
            rows = conn.execute(
                "SELECT seq, queue, phase, code, submitted_at, scheduled_at FROM actions"
                f" WHERE phase IN {FINISHED_SQL} AND ({' OR '.join(past)})"
                " ORDER BY seq LIMIT ?",
                (*args, PRUNE_BATCH),
            ).fetchall()
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
            conn.executemany(
                "INSERT INTO retired_totals (queue, name, value) VALUES (?, ?, ?)"
                " ON CONFLICT (queue, name) DO UPDATE SET value = retired_totals.value"
                " + excluded.value",
                [(queue, name, value) for (queue, name), value in retired.items()],
            )
            conn.executemany("DELETE FROM actions WHERE seq = ?", [(row[0],) for row in rows])
        return len(rows)


def with_retired(
    conn: Conn, totals: dict[str, ActionTotals], wait_bounds_s: tuple[float, ...]
) -> dict[str, ActionTotals]:
    """`totals` of the actions table plus what pruned actions counted, per queue."""
    kept: dict[str, dict[str, float]] = {}
    for queue, name, value in conn.execute("SELECT queue, name, value FROM retired_totals"):
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
