"""Database engine and sessions (SQLAlchemy 2 async; SQLite default, PostgreSQL in production)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar, cast

import asyncpg
from sqlalchemy import Connection, Engine, MetaData, Table, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def upsert(dialect: str, table: Table | type[Base]) -> postgresql.Insert | sqlite.Insert:
    """An INSERT on ``table`` that takes ``ON CONFLICT`` clauses (``on_conflict_do_nothing``,
    ``on_conflict_do_update``, ``excluded``): both databases spell them alike, but SQLAlchemy
    has an Insert of its own for each dialect."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return insert(table)


def async_url(url: str) -> str:
    """Accept plain ``sqlite://`` / ``postgresql://`` URLs and pick the async drivers."""
    parsed = make_url(url)
    if parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str) -> AsyncEngine:
    url = async_url(url)
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs["pool_size"] = 10
        kwargs["max_overflow"] = 20
        # No pre-ping (a round trip per checkout); recycle instead so stale connections go,
        # and a checkout never hands out one the server already closed (_drop_closed).
        kwargs["pool_recycle"] = 1800
    engine = create_async_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        _tune_sqlite(engine.sync_engine)
    else:
        event.listen(engine.sync_engine, "checkout", _drop_closed)
    return engine


def _drop_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Pool checkout: a connection whose socket is gone (the server restarted, a proxy or the
    network dropped it) is replaced before use instead of failing the first statement.

    The driver notices a closed socket on its own, so this costs no round trip (unlike
    ``pool_pre_ping``); the pool retries the checkout with a new connection."""
    driver = getattr(dbapi_connection, "driver_connection", None)
    is_closed = getattr(driver, "is_closed", None)
    if is_closed is not None and is_closed():
        raise DisconnectionError("the database closed this connection")


# What a lost database surfaces as: the driver's own connection errors (raised as they are
# when a new connection fails), the socket's, and SQLAlchemy's wrappers of the rest.
_CONNECTION_LOSS: tuple[type[BaseException], ...] = (
    ConnectionError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InterfaceError,
    DisconnectionError,
)


def is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc`` means the database could not be reached (down, restarting, refusing
    connections, or a connection dropped mid-statement) rather than refusing a statement."""
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
            return True
        return exc.orig is not None and isinstance(exc.orig, _CONNECTION_LOSS)
    return isinstance(exc, _CONNECTION_LOSS)


SQLITE_BUSY_TIMEOUT_MS = 30_000


def _tune_sqlite(engine: Engine, *, batch_writer: bool = False) -> None:
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
        connection.exec_driver_sql(f"BEGIN {mode}")


SQLITE_BEGIN = "invoicing_sqlite_begin"
_DATABASE_KEY = "invoicing_database"
log = logging.getLogger(__name__)

Result = TypeVar("Result")
Shared = TypeVar("Shared")


class Database:
    """Owns the engine; hands out read sessions and write transactions.

    ``sessions()`` is for reads. ``transaction()`` is one unit of work that commits on
    success. On SQLite, write transactions of this process also queue on an asyncio lock:
    waiting there costs nothing, while waiting in SQLite's busy handler means sleeping.
    """

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        # Every session knows its Database (``Database.of``): code handed only a session can
        # still reach this Database's process-local objects.
        info = {_DATABASE_KEY: self}
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False, info=info)
        self._write_lock: asyncio.Lock | None = None
        self._writer = self.engine
        self._write_sessions = self.sessions
        self._batch_writer: _SqliteBatchWriter | None = None
        self._locals: dict[ProcessLocal[Any], object] = {}
        if self.engine.dialect.name == "sqlite":
            self._write_lock = asyncio.Lock()
            self._writer = self.engine.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
            self._write_sessions = async_sessionmaker(
                self._writer, expire_on_commit=False, info=info
            )
            path = self.engine.url.database
            if path not in (None, "", ":memory:"):
                self._batch_writer = _SqliteBatchWriter(self.engine, path)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @staticmethod
    def of(session: AsyncSession) -> Database | None:
        """The Database whose ``sessions()`` or ``transaction()`` made ``session``."""
        found = session.info.get(_DATABASE_KEY)
        return found if isinstance(found, Database) else None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """One unit of work: commit if the block succeeds, roll back if it raises."""
        if self._write_lock is None:
            async with self.sessions() as session, session.begin():
                yield session
            return
        async with self._write_lock, self._write_sessions() as session, session.begin():
            yield session

    async def run_batch(self, work: Callable[[Connection], Result]) -> Result:
        """Run ``work`` (plain Core statements on a sync connection) as one transaction.

        For the hot write paths (invoice creates, replay keys). On PostgreSQL it runs on the
        async driver as usual. On SQLite it runs right here, on the stdlib driver, without
        leaving the event loop's thread: a batch of inserts takes SQLite about a millisecond
        while the write lock is free, and every hand-off to another thread (three or four
        per statement through aiosqlite, or a worker thread contending for the GIL with the
        loop) costs more than that work. Only when another process holds the write lock
        does the batch wait for it, in a worker thread. Its commits leave the copying of the
        WAL into the database file to a background thread (see ``Checkpointer``)."""
        if self._write_lock is None:
            async with self._writer.begin() as connection:
                return await connection.run_sync(work)
        async with self._write_lock:
            if self._batch_writer is not None:
                return await self._batch_writer.run(work)
            async with self._writer.begin() as connection:
                return await connection.run_sync(work)

    async def dispose(self) -> None:
        # Process-local objects that hold work for the database (deferred rate-limit counts)
        # finish it.
        for local in list(self._locals.values()):
            aclose = getattr(local, "aclose", None)
            if aclose is not None:
                await aclose()
        if self._batch_writer is not None:
            await self._batch_writer.dispose()
        await self.engine.dispose()


class ProcessLocal(Generic[Shared]):
    """One object of this process per Database, made by ``make`` on first use: the
    coalescers of the hot paths, the API-key cache, the payment page's re-check throttle.

    Each is declared once, as a module constant beside the code it serves, and read with
    ``of(db)``, typed by that declaration (no string keys). Keeping them on the Database,
    rather than in module globals, gives each Database (each app in a test process) its own,
    and drops them with it; one that has an ``aclose`` finishes its work when the Database
    is disposed."""

    def __init__(self, make: Callable[[Database], Shared]) -> None:
        self._make = make

    def of(self, db: Database) -> Shared:
        """``db``'s object, made now if this is its first use."""
        found = db._locals.get(self)
        if found is None:
            found = db._locals[self] = self._make(db)
        return cast(Shared, found)

    def put(self, db: Database, value: Shared) -> None:
        """Give ``db`` an object made elsewhere (a test's own), before its first use."""
        if self in db._locals:
            raise ValueError("this process-local object is already in use")
        db._locals[self] = value


class _SqliteBatchWriter:
    """``Database.run_batch`` on a SQLite file: one stdlib-driver connection, used by one
    batch at a time (the caller holds the write lock), and the thread that checkpoints
    what its commits leave in the WAL."""

    def __init__(self, engine: AsyncEngine, path: str) -> None:
        url = engine.url.set(drivername="sqlite+pysqlite")
        self._engine = create_sync_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}
        )
        _tune_sqlite(self._engine, batch_writer=True)
        self._connection: Connection | None = None
        self._checkpointer = Checkpointer(path)

    async def run(self, work: Callable[[Connection], Result]) -> Result:
        try:
            return _run_in_transaction(self._open(), work)
        except sqlite3.OperationalError as exc:
            if not _write_lock_taken(exc):
                raise
            return await asyncio.to_thread(
                _run_in_transaction, self._open(), work, SQLITE_BUSY_TIMEOUT_MS
            )
        finally:
            self._checkpointer.wake()

    def _open(self) -> Connection:
        """The kept connection: a checkout from the pool per batch cost more than a small
        batch."""
        connection = self._connection
        if connection is None or connection.closed or connection.invalidated:
            connection = self._connection = self._engine.connect()
        return connection

    async def dispose(self) -> None:
        await asyncio.to_thread(self._checkpointer.stop)
        if self._connection is not None:
            self._connection.close()
        self._engine.dispose()


def _run_in_transaction(
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


def _write_lock_taken(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
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
        connection = sqlite3.connect(self._path, timeout=30, isolation_level=None)
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
            _busy, log_pages, _copied = connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            if log_pages > self._restart_pages:
                connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.Error:
            log.warning("WAL checkpoint failed; the next commit retries it", exc_info=True)
