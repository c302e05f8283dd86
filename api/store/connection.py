"""The database every part of the store works on: its transactions, and helpers they share.

Each part of the store (api.store.actions, api.store.tick_io, api.store.job_queues, ...)
subclasses `SqlDatabase`; api.store.sql_store.SqlStore joins them over one database, a
SQLite file or a PostgreSQL database (api.store.backends: the same SQL on both). All of
this process's writes go through one write transaction at a time (`_write_lock`), which
the group commit of submissions relies on; the backend serializes them with other
processes' writes. Reads run in parallel, each one consistent read transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.store.backends import Conn, open_backend
from api.store.records import LeaseLost, Listing, Order


def stored_time(value: datetime | None) -> str | None:
    """A time as its column holds it: ISO 8601 in UTC, so text order is time order."""
    return None if value is None else value.astimezone(UTC).isoformat()


def read_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def read_page(
    conn: Conn,
    select: str,
    filters: list[tuple[str, object]],
    listing: Listing,
) -> tuple[list[tuple[Any, ...]], int | None]:
    """One page of `select` (whose first column is `seq`, of a table with `submitted_at`),
    filtered by `filters` (SQL condition with one `?`, value), as `listing` says; returns the
    rows (without seq) and the seq to continue after, None on the last page."""
    conditions = [(condition, value) for condition, value in filters if value is not None]
    descending = listing.order is Order.DESC
    if listing.after is not None:
        conditions.append(("seq < ?" if descending else "seq > ?", listing.after))
    for condition, moment in (
        ("submitted_at > ?", listing.submitted_after),
        ("submitted_at < ?", listing.submitted_before),
    ):
        if moment is not None:
            conditions.append((condition, stored_time(moment)))
    sql = select
    if conditions:
        sql += " WHERE " + " AND ".join(condition for condition, _ in conditions)
    sql += f" ORDER BY seq {'DESC' if descending else 'ASC'} LIMIT ?"
    rows = conn.execute(sql, [value for _, value in conditions] + [listing.limit + 1]).fetchall()
    more = len(rows) > listing.limit
    rows = rows[: listing.limit]
    return [row[1:] for row in rows], rows[-1][0] if more else None


def read_generation(conn: Conn) -> int:
    """The store's generation: see api.store.tick_io.SqlTickIO.apply_tick."""
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(value)


def bump_generation(conn: Conn) -> None:
    """Move the generation on, inside a write transaction: ticks planned before it are refused."""
    conn.execute(
        "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'generation'"
    )


def check_epoch(conn: Conn, epoch: int | None) -> None:
    """Inside a write transaction: refuse it unless `epoch` is the leader lease's current
    epoch (api.store.leadership). None skips the check: a caller that is the only writer
    (a tool, a test)."""
    if epoch is None:
        return
    (current,) = conn.execute("SELECT epoch FROM leader_lease WHERE id = 1").fetchone()
    if current != epoch:
        raise LeaseLost(
            f"this replica led at epoch {epoch}, but the lease is at epoch {current}: another"
            " replica ticks now, so this write was not applied"
        )


class SqlDatabase:
    """One database (a SQLite file's path, or a postgresql:// URL) and its transactions.

    `reader_only`: this process only reads a database another process writes (the tick's
    worker, api.tick_work): no lock, and every transaction refuses writes."""

    def __init__(self, target: str | Path, *, reader_only: bool = False) -> None:
        self._db = open_backend(str(target), reader_only=reader_only)
        self.target = str(target)  # how another process opens the same database
        self.path = self._db.shown  # what messages call the database
        self._write_lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """Whether other processes may serve this database too (PostgreSQL): what a tick
        shows is then stored for them. A SQLite file has one server, which keeps it."""
        return not self._db.exclusive

    @contextmanager
    def _write(self) -> Iterator[Conn]:
        """One write transaction, committed (and durable) on success, rolled back on error."""
        with self._write_lock, self._transaction() as conn:
            yield conn

    def _transaction(self) -> AbstractContextManager[Conn]:
        """A write transaction; the caller holds the write lock."""
        return self._db.transaction()

    def _read(self) -> AbstractContextManager[Conn]:
        """One read transaction: every query inside sees the same committed state."""
        return self._db.read()

    def close(self) -> None:
        with self._write_lock:
            self._db.close()
