"""The two databases the store runs on, behind one small connection layer.

SQLite (a file, the default: no server) and PostgreSQL (psycopg 3 over a connection pool,
for many replicas on one database). Every part of the store writes its SQL once, with `?`
placeholders, in the subset both understand (`ON CONFLICT ... DO NOTHING | DO UPDATE`,
`CAST`, `CASE`, `COALESCE`); `Conn` turns the placeholders into psycopg's once per
statement, and `Dialect` spells the few expressions that differ (the database clock, a
JSON field, a stored time as seconds).

Writes are serialized across every process on the database, because caps, depths and
node room are checked by reading inside the write transaction: SQLite has one writer
per file (and `WriterLock` keeps a second server off it); on PostgreSQL every write
transaction begins by taking one transaction-level advisory lock, so the replicas'
writes run one at a time, each seeing all the others committed. Reads never take it.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import queue as queue_mod
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from models.errors import FailedPrecondition, InternalError, InvalidInput, Unavailable

log = logging.getLogger("sluice.store")

POSTGRES_SCHEMES = ("postgresql", "postgres")
# Any fixed number: the key of the advisory lock every write transaction takes on PostgreSQL.
_WRITE_LOCK_KEY = 0x5151CE
# A session idle this long inside a write transaction is ended by the server, its locks
# released: a replica paused (SIGSTOP) or cut off mid-transaction cannot hold every other
# replica's writes, and the leader lease with them, for longer than this.
IDLE_IN_TRANSACTION_S = 2.0
# A read holds no lock another replica waits on, only a snapshot, so it is given far longer:
# the write limit ended healthy reads on a loaded 2-core machine whose disk stalled for seconds.
IDLE_IN_READ_S = 30.0


def is_postgres(target: str) -> bool:
    """Whether `target` names a PostgreSQL database (a URL) rather than a SQLite file."""
    return urlsplit(target).scheme in POSTGRES_SCHEMES


def shown_target(target: str) -> str:
    """`target` as messages and logs may show it: a URL without its password."""
    if not is_postgres(target):
        return target
    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class DuplicateKey(Exception):
    """A row's key is taken (either driver's integrity error); the store's parts turn it
    into models.errors.AlreadyExists with the words of what was taken."""


class Rows(Protocol):
    """What a statement hands back, on either driver."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


@dataclass(frozen=True)
class Dialect:
    """The expressions the two databases spell differently."""

    name: str  # "sqlite" | "postgresql"
    now_s: str  # the database's clock, in seconds since the epoch (a float)
    _seconds: str  # {} is an ISO 8601 text column
    _json_text: str  # {column}, {key}

    def seconds(self, column: str) -> str:
        """A stored time (ISO 8601 text) as seconds since the epoch."""
        return self._seconds.format(column)

    def json_text(self, column: str, key: str) -> str:
        """The text of top-level field `key` of a JSON text column (NULL if absent)."""
        return self._json_text.format(column=column, key=key)


SQLITE = Dialect(
    name="sqlite",
    now_s="((julianday('now') - 2440587.5) * 86400.0)",
    _seconds="((julianday({}) - 2440587.5) * 86400.0)",
    _json_text="json_extract({column}, '$.{key}')",
)
POSTGRES = Dialect(
    name="postgresql",
    now_s="CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)",
    _seconds="CAST(EXTRACT(EPOCH FROM CAST({} AS TIMESTAMPTZ)) AS DOUBLE PRECISION)",
    _json_text="(CAST({column} AS JSON) ->> '{key}')",
)


@functools.lru_cache(maxsize=1024)
def _psycopg_sql(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (and a literal `%` doubled). The store's SQL has
    no `?` inside string literals."""
    return sql.replace("%", "%%").replace("?", "%s")


class Conn:
    """One connection inside one transaction: `?` placeholders on either driver, a taken
    key raised as `DuplicateKey`."""

    def __init__(self, raw: Any, dialect: Dialect) -> None:
        self._raw = raw
        self.dialect = dialect
        self._translate = _psycopg_sql if dialect is POSTGRES else str
        self._duplicate = _integrity_errors(dialect)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        cursor = self._raw.cursor()
        try:
            cursor.execute(self._translate(sql), params)
        except self._duplicate as error:
            raise DuplicateKey(str(error)) from None
        rows: Rows = cursor
        return rows

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """`sql` once per row of `params`. One statement at a time, not psycopg's pipelined
        executemany: a pipeline awaiting its sync is not "idle in transaction" to the
        server, so a replica paused inside one would hold the write lock past
        IDLE_IN_TRANSACTION_S; each statement is prepared once by psycopg and reused."""
        for row in params:
            self.execute(sql, row)


def _integrity_errors(dialect: Dialect) -> tuple[type[Exception], ...]:
    if dialect is POSTGRES:
        import psycopg

        return (psycopg.IntegrityError,)
    return (sqlite3.IntegrityError,)


class Backend:
    """A database the store's parts run their transactions on (one of the two below)."""

    dialect: Dialect
    shown: str  # the database, for messages (a URL without its password)
    driver_errors: tuple[type[BaseException], ...]  # what the driver raises
    # Whether this process is the only one on the database while it is open (SQLite's flock).
    exclusive: bool = False

    def transaction(self) -> AbstractContextManager[Conn]:
        """A write transaction, committed on success and rolled back on error, serialized
        with every other process's writes. The caller holds this process's write lock."""
        raise NotImplementedError

    def read(self) -> AbstractContextManager[Conn]:
        """A read transaction: every query inside sees the same committed state."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def open_backend(target: str, *, reader_only: bool = False) -> Backend:
    """The database `target` names: a postgresql:// URL, or else a SQLite file's path.
    `reader_only`: for a process that never writes it (see SqliteBackend)."""
    if is_postgres(target):
        return PostgresBackend(target, reader_only=reader_only)
    # A URL of another database would otherwise become a strange relative file path.
    if "://" in target:
        scheme = urlsplit(target).scheme
        raise InvalidInput(
            f"database: {scheme}:// is not a database Sluice runs on; give a postgresql:// URL"
            " or a SQLite file's path"
        )
    return SqliteBackend(target, reader_only=reader_only)


def _refuse_writes(shown: str) -> InternalError:
    return InternalError(f"{shown} is open here for reading only")


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
                " one server per database file: stop that one first (many replicas need"
                " PostgreSQL: --db postgresql://...)"
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


class SqliteBackend(Backend):
    """One SQLite file in WAL mode with fsync on every commit, written by this process only.

    All writes go through one connection (SQLite has one writer anyway); reads use a small
    pool of connections, so reads never wait for a write. The file and its WAL and SHM
    files are created 0600: they hold every team's work and the fleet's layout.
    """

    dialect = SQLITE
    driver_errors = (sqlite3.Error,)

    def __init__(self, path: str, *, reader_only: bool = False) -> None:
        """`reader_only`: this process only reads a file another process writes (WAL lets
        readers in other processes see each committed state): no lock, no writer
        connection, and every connection refuses writes."""
        self.path = self.shown = path
        self.exclusive = not reader_only  # a reader shares the file with its writer
        self.reader_only = reader_only
        self._file_lock: WriterLock | None = None
        self._writer: sqlite3.Connection | None = None
        if not reader_only:
            self._file_lock = WriterLock(path)
            try:
                _create_private(path)
                self._writer = self._connect()
                self._writer.execute("PRAGMA journal_mode=WAL")
            except BaseException:
                self._file_lock.release()
                raise
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

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        conn = self._writer
        if conn is None:
            raise _refuse_writes(self.shown)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield Conn(conn, SQLITE)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def read(self) -> Iterator[Conn]:
        try:
            conn = self._readers.get_nowait()
        except queue_mod.Empty:
            conn = self._connect()
            with self._readers_lock:
                self._all_readers.append(conn)
        try:
            conn.execute("BEGIN")
            try:
                yield Conn(conn, SQLITE)
            finally:
                conn.execute("COMMIT")
        finally:
            self._readers.put(conn)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        with self._readers_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()
        if self._file_lock is not None:
            self._file_lock.release()


def _idle_limit(seconds: float, scope: str) -> str:
    return f"SET {scope} idle_in_transaction_session_timeout = {int(seconds * 1000)}"


def _configure(conn: Any) -> None:
    """Each new pooled connection: see IDLE_IN_READ_S."""
    conn.execute(_idle_limit(IDLE_IN_READ_S, "SESSION"))


class PostgresBackend(Backend):
    """A PostgreSQL database through a pool of psycopg 3 connections, shared by replicas.

    Writes are serialized across replicas by a transaction-level advisory lock taken first
    in each write transaction (released by COMMIT or ROLLBACK, or by the server when the
    connection drops), so a check of a cap or a depth inside one sees every write before
    it, as on SQLite. The server ends a session left idle in a write transaction for
    `IDLE_IN_TRANSACTION_S`, so a paused replica cannot hold that lock for long. Reads are
    REPEATABLE READ, so a snapshot is consistent. A lost connection is `Unavailable` (503),
    never a traceback.
    """

    dialect = POSTGRES

    def __init__(self, url: str, *, reader_only: bool = False) -> None:
        """`reader_only`: for a process that never writes (every transaction is refused)."""
        import psycopg
        import psycopg_pool

        self.reader_only = reader_only
        self.shown = shown_target(url)
        self.driver_errors = (psycopg.Error,)
        self._lost = (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout)
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=2,
                max_size=12,
                kwargs={"autocommit": True},
                configure=_configure,
                timeout=10.0,
                open=False,
                name="sluice",
            )
        )
        try:
            self._pool.open(wait=True, timeout=10.0)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            raise Unavailable(f"cannot connect to the database {self.shown}") from None

    @contextmanager
    def _connection(self, begin: str, *first: str) -> Iterator[Conn]:
        try:
            with self._pool.connection() as raw:
                raw.execute(begin)
                try:
                    for statement in first:
                        raw.execute(statement)
                    yield Conn(raw, POSTGRES)
                    raw.execute("COMMIT")
                except BaseException:
                    if not raw.broken:
                        raw.execute("ROLLBACK")
                    raise
        except self._lost as error:
            raise Unavailable(f"the database {self.shown} is unreachable: {error}") from None

    def transaction(self) -> AbstractContextManager[Conn]:
        if self.reader_only:
            raise _refuse_writes(self.shown)
        return self._connection(
            "BEGIN",
            _idle_limit(IDLE_IN_TRANSACTION_S, "LOCAL"),
            f"SELECT pg_advisory_xact_lock({_WRITE_LOCK_KEY})",
        )

    def read(self) -> AbstractContextManager[Conn]:
        return self._connection("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def close(self) -> None:
        self._pool.close()
