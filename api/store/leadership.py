"""Which replica ticks: a lease in the database, and the last tick any leader wrote back.

The lease row names its holder, the epoch it holds it at and when it ends, in seconds on
the database's clock (so replicas' clocks never have to agree). A holder renews it; when
it has run out, any replica may take it with the next epoch. The leader's writes (a
tick's write-back, deadline expiry, idle pools, trigger firings) check in their own
transaction that their epoch is still the lease's (`check_epoch`), so a replica that was
paused or cut off past its lease cannot apply anything once another took over.

Where other replicas may read it (`shared`: PostgreSQL), the last tick's row also holds what
it shows readers: its result, its blocked heads' explanations, the actions it failed at their
deadline, and (once made, after the write-back) its waiting actions' start forecasts. A SQLite
file has one server, which keeps all of that in memory: its row holds the number alone.

On SQLite one process holds the file, so it always holds the lease too; the same code
runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import TypeAdapter

from api.store.backends import Conn
from api.store.connection import SqlDatabase, read_time, stored_time
from api.store.records import LastTick, Lease, TickViews
from models.explanation import Explanation
from models.forecast import StartForecast, forecast_lines, read_forecast_lines
from models.result import read_result_text

_EXPLANATIONS: TypeAdapter[dict[str, Explanation]] = TypeAdapter(dict[str, Explanation])


@dataclass(frozen=True)
class TickRow:
    """A tick's result and views as JSON, made before its write-back's transaction: on
    PostgreSQL that transaction holds every replica's write lock."""

    result: str
    head_explanations: str
    deadline_exceeded: str

    @classmethod
    def of(cls, result_text: str, views: TickViews) -> TickRow:
        """`result_text`: the result as models.result.result_text writes it."""
        return cls(
            result=result_text,
            head_explanations=_EXPLANATIONS.dump_json(views.head_explanations).decode(),
            deadline_exceeded=json.dumps(views.deadline_exceeded),
        )


def record_tick(conn: Conn, epoch: int | None, row: TickRow | None) -> int:
    """Inside a tick's write-back: keep it as the last tick (with `row`, which is None where
    no other process reads it); returns its number. Its forecasts come later."""
    conn.execute(
        "UPDATE last_tick SET number = number + 1, epoch = ?, finished_at = ?, result = ?,"
        " head_explanations = ?, deadline_exceeded = ?, forecasts = NULL WHERE id = 1",
        (
            epoch or 0,
            stored_time(datetime.now(UTC)),
            row.result if row else None,
            row.head_explanations if row else None,
            row.deadline_exceeded if row else None,
        ),
    )
    (number,) = conn.execute("SELECT number FROM last_tick WHERE id = 1").fetchone()
    return int(number)


class SqlLeadership(SqlDatabase):
    """The lease and the last tick over the store's database."""

    def hold_lease(self, holder: str, epoch: int | None, ttl_s: float) -> Lease:
        """Renew the lease if `holder` holds it at `epoch` (also when it ran out and nobody
        took it since: no one else can have written as leader); take it at the next epoch if
        it has run out; otherwise leave it."""
        with self._write() as conn:
            now_s = conn.dialect.now_s
            current_holder, current, expires_s, now = conn.execute(
                f"SELECT holder, epoch, expires_s, {now_s} FROM leader_lease WHERE id = 1"
            ).fetchone()
            if current_holder == holder and current == epoch:
                conn.execute(
                    f"UPDATE leader_lease SET expires_s = {now_s} + ? WHERE id = 1", (ttl_s,)
                )
                return Lease(holder, current, ttl_s)
            if expires_s <= now:
                conn.execute(
                    f"UPDATE leader_lease SET holder = ?, epoch = ?, expires_s = {now_s} + ?"
                    " WHERE id = 1",
                    (holder, current + 1, ttl_s),
                )
                return Lease(holder, current + 1, ttl_s)
            return Lease(current_holder, current, expires_s - now)

    def release_lease(self, holder: str, epoch: int) -> None:
        """End the lease now if `holder` still holds it at `epoch` (a clean shutdown), so
        another replica takes over at once instead of when it would have run out."""
        with self._write() as conn:
            conn.execute(
                "UPDATE leader_lease SET expires_s = 0 WHERE id = 1 AND holder = ? AND epoch = ?",
                (holder, epoch),
            )

    def last_tick(self, after: int = -1) -> LastTick:
        """The last tick written back; its result and views only if its number is past
        `after` (a caller that has tick `after` already need not parse them again)."""
        with self._read() as conn:
            number, epoch, finished_at, result, explanations, expired = conn.execute(
                "SELECT number, epoch, finished_at, CASE WHEN number > ? THEN result END,"
                " CASE WHEN number > ? THEN head_explanations END,"
                " CASE WHEN number > ? THEN deadline_exceeded END FROM last_tick WHERE id = 1",
                (after, after, after),
            ).fetchone()
        views = TickViews(
            head_explanations=_EXPLANATIONS.validate_json(explanations) if explanations else {},
            deadline_exceeded=json.loads(expired) if expired else {},
        )
        return LastTick(
            number=number,
            epoch=epoch,
            finished_at=read_time(finished_at),
            result=read_result_text(result) if result else None,
            views=views,
            text=result,
        )

    def record_forecasts(self, number: int, forecasts: Mapping[str, StartForecast]) -> None:
        """Keep tick `number`'s forecasts with it, if it is still the last tick (a forecast
        made after another leader's newer tick is dropped) and other processes read it."""
        if not self.shared:
            return
        # No forecasts are "{}", which is not NULL (not made yet).
        stored = "\n".join(line.decode() for line in forecast_lines(forecasts)) or "{}"
        with self._write() as conn:
            conn.execute(
                "UPDATE last_tick SET forecasts = ? WHERE id = 1 AND number = ?", (stored, number)
            )

    def tick_forecasts(self, number: int) -> dict[str, StartForecast] | None:
        """Tick `number`'s forecasts, once its leader has made them; None before that, or if
        the last tick is another one by now."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT forecasts FROM last_tick WHERE id = 1 AND number = ?", (number,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        return read_forecast_lines(row[0].split("\n"))
