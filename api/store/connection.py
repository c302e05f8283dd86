"""The SQLite file every part of the store works on: its connections and transactions.

All writes go through one connection under a lock (SQLite has one writer anyway);
reads use a small pool of connections, so reads never wait for a write and a
snapshot is one consistent read transaction. Each part of the store
(api.store.actions, api.store.tick_io, api.store.job_queues) subclasses `SqliteFile`;
api.store.sqlite.SqliteStore joins them over one file.
"""

from __future__ import annotations

import queue as queue_mod
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from models.errors import Unavailable


def stored_time(value: datetime | None) -> str | None:
    """A time as its column holds it: ISO 8601 in UTC, so text order is time order."""
    return None if value is None else value.astimezone(UTC).isoformat()


def read_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class SqliteFile:
    """One SQLite file in WAL mode with fsync on every commit."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._write_lock = threading.Lock()
        self._writer = self._connect()
        self._readers: queue_mod.SimpleQueue[sqlite3.Connection] = queue_mod.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._writer.execute("PRAGMA journal_mode=WAL")

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
        except sqlite3.Error as error:
            raise Unavailable(f"cannot open the database {self.path}: {error}") from None
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed (and fsynced) on success, rolled back on error."""
        with self._write_lock, self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the writer connection; the caller holds the write lock."""
        conn = self._writer
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
            self._writer.close()
        with self._readers_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()
