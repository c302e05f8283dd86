"""The SQLite file every part of the store works on: its connections and transactions.

All writes go through one connection under a lock (SQLite has one writer anyway);
reads use a small pool of connections, so reads never wait for a write and a
snapshot is one consistent read transaction. Each part of the store
(api.store.actions, api.store.tick_io, api.store.job_queues) subclasses `SqliteFile`;
api.store.sqlite.SqliteStore joins them over one file.

One process writes a file at a time: opening it takes an exclusive lock on the sidecar
`<db>.lock` (see `WriterLock`), so a second server on the same file refuses to start
instead of ticking beside the first and overrunning caps. The file and its WAL and SHM
files are created 0600: they hold every team's work and the fleet's layout.
"""

from __future__ import annotations

import fcntl
import logging
import os
import queue as queue_mod
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.store.records import Listing, Order
from models.errors import FailedPrecondition, InternalError, Unavailable

log = logging.getLogger("sluice.store")


def stored_time(value: datetime | None) -> str | None:
    """A time as its column holds it: ISO 8601 in UTC, so text order is time order."""
    return None if value is None else value.astimezone(UTC).isoformat()


def read_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class WriterLock:
    """An exclusive flock on `<db>.lock`, held while this process may write the database.

    The OS drops a flock when its holder exits, however it exits (kill -9 included), so
    a crashed server never leaves a stale lock behind. The file holds the holder's pid,
    for the message a second writer gets; it is never deleted, because a process could
    then lock an unlinked file while another locks its replacement.
    """

    def __init__(self, database: str) -> None:
        self.path = f"{database}.lock"
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise Unavailable(f"cannot open the lock file {self.path}: {error}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise FailedPrecondition(
                f"{database} is in use by another Sluice server (pid {holder}, lock {self.path});"
                " one server per database file: stop that one first"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd < 0:
            return
        os.ftruncate(self._fd, 0)  # no pid of a process that no longer holds the lock
        os.close(self._fd)  # closing the last descriptor releases the flock
        self._fd = -1


def _create_private(path: str) -> None:
    """Create the database file 0600 if it does not exist yet.

    SQLite gives the WAL and SHM files it creates the database file's mode, so the
    mode set here covers all three.
    """
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        mode = os.stat(path).st_mode & 0o777
        if mode & 0o077:
            log.warning("%s is open to other users (mode %o); chmod 600 it", path, mode)
    except OSError as error:
        raise Unavailable(f"cannot create the database {path}: {error}") from None


def read_page(
    conn: sqlite3.Connection,
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


def read_generation(conn: sqlite3.Connection) -> int:
    """The store's generation: see api.store.tick_io.SqliteTickIO.apply_tick."""
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(value)


def bump_generation(conn: sqlite3.Connection) -> None:
    """Move the generation on, inside a write transaction: ticks planned before it are refused."""
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")


class SqliteFile:
    """One SQLite file in WAL mode with fsync on every commit, written by this process only.

    `reader_only`: this process only reads a file another process writes (the tick's worker,
    api.tick_work): no lock, no writer connection, and every connection refuses writes (WAL
    lets readers in other processes see each committed state)."""

    def __init__(self, path: str | Path, *, reader_only: bool = False) -> None:
        self.path = str(path)
        self.reader_only = reader_only
        self._file_lock: WriterLock | None = None
        self._writer: sqlite3.Connection | None = None
        if not reader_only:
            self._file_lock = WriterLock(self.path)
            try:
                _create_private(self.path)
                self._writer = self._connect()
                self._writer.execute("PRAGMA journal_mode=WAL")
            except BaseException:
                self._file_lock.release()
                raise
        self._write_lock = threading.Lock()
        self._readers: queue_mod.SimpleQueue[sqlite3.Connection] = queue_mod.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
        except sqlite3.Error as error:
            raise Unavailable(f"cannot open the database {self.path}: {error}") from None
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        if self.reader_only:
            conn.execute("PRAGMA query_only=ON")
        return conn

    def _writer_connection(self) -> sqlite3.Connection:
        if self._writer is None:
            raise InternalError(f"{self.path} is open here for reading only")
        return self._writer

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and fsynced) on success, rolled back on error."""
        with self._write_lock, self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the writer connection; the caller holds the write lock."""
        conn = self._writer_connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same committed state."""
        try:
            conn = self._readers.get_nowait()
        except queue_mod.Empty:
            conn = self._connect()
            with self._readers_lock:
                self._all_readers.append(conn)
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        finally:
            self._readers.put(conn)

    def close(self) -> None:
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
        with self._readers_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()
        if self._file_lock is not None:
            self._file_lock.release()
