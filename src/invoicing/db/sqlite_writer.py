"""SQLite's side of ``invoicing.db``: how its connections are tuned, and the batch writer
that runs the hot write paths on the event loop's thread (``Database.run_batch``,
``Database.run_statement``) with a thread that checkpoints its write-ahead log."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

Result = TypeVar("Result")

SQLITE_BUSY_TIMEOUT_MS = 30_000
# How long the checkpointer's RESTART waits for the write lock and for readers (its
# connection's busy timeout; PASSIVE never waits).
RESTART_WAIT_MS = 250


def tune_sqlite(engine: Engine, *, batch_writer: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Several workers share one file: WAL lets readers go on while one writer commits.
        # Leave transaction control to us (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # The batch writer never waits inside SQLite: it runs on the event loop's thread and
        # waits for a busy write lock in a worker thread instead (Database.run_batch).
        cursor.execute(f"PRAGMA busy_timeout={0 if batch_writer else SQLITE_BUSY_TIMEOUT_MS}")
        # WAL + NORMAL: a commit survives a crash of the process (not of the OS); the
        # production database is PostgreSQL.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        if batch_writer:
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.close()

    if batch_writer:
        return  # it begins its transactions itself (_run_in_transaction)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Write transactions take the write lock up front (BEGIN IMMEDIATE), so a
        # read-then-write transaction never fails on a lock upgrade; reads stay deferred and
        # never wait for writers.
        mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
        if mode is not None:  # None: autocommit reads (Database.reads), no BEGIN at all
            connection.exec_driver_sql(f"BEGIN {mode}")


SQLITE_BEGIN = "invoicing_sqlite_begin"
# Set on the connections of ``Database.reads`` and ``Database.run_statement``: each statement
# is its own transaction, and SQLAlchemy's begin, commit and rollback send nothing.
AUTOCOMMIT = "invoicing_autocommit"


class SqliteBatchWriter:
    """``Database.run_batch`` on a SQLite file: one stdlib-driver connection, used by one
    batch at a time (the caller holds the write lock), and the thread that checkpoints
    what its commits leave in the WAL."""

    def __init__(self, engine: AsyncEngine, path: str) -> None:
        url = engine.url.set(drivername="sqlite+pysqlite")
        self.engine = create_sync_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}
        )
        tune_sqlite(self.engine, batch_writer=True)
        self._connection: Connection | None = None
        self._reader: Connection | None = None  # ``read``'s, apart from the batches' one
        self._checkpointer = Checkpointer(path)

    async def run(self, work: Callable[[Connection], Result], autocommit: bool = False) -> Result:
        run = run_alone if autocommit else run_in_transaction
        try:
            return run(self._open(), work)
        except (sqlite3.OperationalError, DBAPIError) as exc:
            # A batch's BEGIN IMMEDIATE raises the driver's error; a lone statement that
            # takes the lock itself raises it wrapped by SQLAlchemy. Either way nothing was
            # written: wait for the lock in a worker thread and run it again.
            if not write_lock_taken(exc):
                raise
            return await asyncio.to_thread(run, self._open(), work, SQLITE_BUSY_TIMEOUT_MS)
        finally:
            self._checkpointer.wake()

    async def read(self, work: Callable[[Connection], Result]) -> Result:
        """``work`` (reads, each statement its own transaction) right here on a kept
        connection of its own: a point read takes SQLite microseconds, less than the hand-offs
        to aiosqlite's thread and back. In WAL mode a read waits for no writer; should SQLite
        still answer busy (another process recovering the log), it waits in a worker thread,
        on a connection of that thread."""
        try:
            return run_alone(self._open_reader(), work)
        except (sqlite3.OperationalError, DBAPIError) as exc:
            if not write_lock_taken(exc):
                raise
            return await asyncio.to_thread(self._read_waiting, work)

    def _read_waiting(self, work: Callable[[Connection], Result]) -> Result:
        with self.engine.connect() as connection:
            return run_alone(connection, work, SQLITE_BUSY_TIMEOUT_MS)

    def _open_reader(self) -> Connection:
        connection = self._reader
        if connection is None or connection.closed or connection.invalidated:
            connection = self._reader = self.engine.connect()
        return connection

    def _open(self) -> Connection:
        """The kept connection: a checkout from the pool per batch cost more than a small
        batch."""
        connection = self._connection
        if connection is None or connection.closed or connection.invalidated:
            connection = self._connection = self.engine.connect()
        return connection

    async def dispose(self) -> None:
        await asyncio.to_thread(self._checkpointer.stop)
        for connection in (self._connection, self._reader):
            if connection is not None:
                connection.close()
        self.engine.dispose()


def run_in_transaction(
    connection: Connection, work: Callable[[Connection], Result], busy_timeout_ms: int = 0
) -> Result:
    """``work`` in one transaction that holds the write lock from its start (BEGIN
    IMMEDIATE). The lock is taken on the driver's connection, which is cheaper than through
    SQLAlchemy and leaves SQLAlchemy's state untouched if it is busy; with
    ``busy_timeout_ms`` it waits that long for it (the batch writer's default is not to)."""
    driver: Any = connection.connection.driver_connection
    if busy_timeout_ms:
        driver.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    try:
        driver.execute("BEGIN IMMEDIATE")
    finally:
        if busy_timeout_ms:
            driver.execute("PRAGMA busy_timeout=0")
    try:
        with connection.begin():  # commits (or rolls back) the driver's transaction
            return work(connection)
    finally:
        if driver.in_transaction:  # only if SQLAlchemy's commit or rollback itself failed
            driver.rollback()


def run_alone(
    connection: Connection, work: Callable[[Connection], Result], busy_timeout_ms: int = 0
) -> Result:
    """``work`` (one statement) as its own transaction: SQLite takes and releases the write
    lock around it (``Database.run_statement``)."""
    driver: Any = connection.connection.driver_connection
    if busy_timeout_ms:
        driver.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    connection.execution_options(**{AUTOCOMMIT: True})  # the same connection, marked
    try:
        return work(connection)
    finally:
        connection.rollback()  # ends SQLAlchemy's implicit transaction; sends nothing
        connection.execution_options(**{AUTOCOMMIT: False})
        if busy_timeout_ms:
            driver.execute("PRAGMA busy_timeout=0")


def write_lock_taken(exc: sqlite3.OperationalError | DBAPIError) -> bool:
    """Whether ``exc`` (the driver's, or SQLAlchemy's wrapping of it) is SQLITE_BUSY."""
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    code = getattr(cause, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


class Checkpointer:
    """Copies SQLite's write-ahead log back into the database file in a background thread.

    By default the commit that takes the WAL past 1000 pages does that copy itself, syncing
    both files to disk before it returns, so every few dozen batches one request batch waits
    for the disk (it more than doubled the cost of a create). The batch writer's connections
    turn that off (``wal_autocheckpoint=0``) and wake this thread after each commit instead.

    At most every ``interval`` seconds it runs a PASSIVE checkpoint, which copies the log
    while readers and writers go on. Under steady writes that alone never lets the log start
    over (new frames keep arriving), so once the log holds more than ``restart_pages`` it
    follows with a RESTART checkpoint: it waits for the current writer, copies the few frames
    written meanwhile, and makes the next writer reuse the log from its start. A batch that
    finds the write lock taken by it waits in a worker thread (``Database.run_batch``). Other
    connections keep SQLite's default, so the log stays bounded even when this thread is
    not running (another process, or after ``stop``)."""

    def __init__(self, path: str, interval: float = 0.2, restart_pages: int = 1000) -> None:
        self._path = path
        self._interval = interval
        self._restart_pages = restart_pages
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        """Called after a commit that skipped its checkpoint."""
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stopped.is_set():
                    self._thread = threading.Thread(
                        target=self._run, name="sqlite-checkpoint", daemon=True
                    )
                    self._thread.start()
        self._wakeup.set()

    def stop(self) -> None:
        """End the thread after a last checkpoint."""
        with self._lock:
            self._stopped.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        # PASSIVE never waits; RESTART waits this long at most (see _checkpoint).
        connection = sqlite3.connect(
            self._path, timeout=RESTART_WAIT_MS / 1000, isolation_level=None
        )
        try:
            while not self._stopped.is_set():
                self._wakeup.wait()
                self._wakeup.clear()
                self._checkpoint(connection)
                self._stopped.wait(self._interval)
            self._checkpoint(connection)
        finally:
            connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            _busy, log_pages, copied = connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            # RESTART holds the write lock while it waits for readers of the old log, so a
            # slow reader in another process would stall every writer for as long as it
            # waits. It runs only once PASSIVE could copy the whole log (no reader holds an
            # older snapshot), waits briefly, and the next wake-up tries again.
            if log_pages > self._restart_pages and copied == log_pages:
                connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.Error:
            log.warning("WAL checkpoint failed; the next commit retries it", exc_info=True)
