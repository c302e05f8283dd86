"""Which replica ticks: a lease in the database, and the last tick any leader wrote back.

The lease row names its holder, the epoch it holds it at and when it ends, in seconds on
the database's clock (so replicas' clocks never have to agree). A holder renews it; when
it has run out, any replica may take it with the next epoch. The leader's writes (a
tick's write-back, deadline expiry, idle pools, trigger firings) check in their own
transaction that their epoch is still the lease's (`check_epoch`), so a replica that was
paused or cut off past its lease cannot apply anything once another took over.

On SQLite one process holds the file, so it always holds the lease too; the same code
runs.
"""

from __future__ import annotations

from datetime import UTC, datetime

from api.store.backends import Conn
from api.store.connection import SqlDatabase, read_time, stored_time
from api.store.records import LastTick, Lease
from models.result import TickResult


def record_tick(conn: Conn, epoch: int | None, result: TickResult) -> int:
    """Inside a tick's write-back: keep it as the last tick; returns its number."""
    conn.execute(
        "UPDATE last_tick SET number = number + 1, epoch = ?, finished_at = ?, result = ?"
        " WHERE id = 1",
        (epoch or 0, stored_time(datetime.now(UTC)), result.model_dump_json()),
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
        """The last tick written back; its result only if its number is past `after` (a
        caller that has tick `after` already need not parse it again)."""
        with self._read() as conn:
            number, epoch, finished_at, result = conn.execute(
                "SELECT number, epoch, finished_at,"
                " CASE WHEN number > ? THEN result END FROM last_tick WHERE id = 1",
                (after,),
            ).fetchone()
        return LastTick(
            number=number,
            epoch=epoch,
            finished_at=read_time(finished_at),
            result=TickResult.model_validate_json(result) if result else None,
        )
