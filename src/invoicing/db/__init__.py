"""Database engine and sessions (SQLAlchemy 2 async; SQLite default, PostgreSQL in production)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar, cast

import asyncpg
from sqlalchemy import Connection, Engine, MetaData, Table, event
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

from invoicing.db.sqlite_writer import (
    AUTOCOMMIT,
    SQLITE_BEGIN,
    Checkpointer,
    SqliteBatchWriter,
    tune_sqlite,
)

__all__ = ["AUTOCOMMIT", "SQLITE_BEGIN", "Checkpointer", "Database", "ProcessLocal"]

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
        tune_sqlite(engine.sync_engine)
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


_DATABASE_KEY = "invoicing_database"
log = logging.getLogger(__name__)

Result = TypeVar("Result")
Shared = TypeVar("Shared")


class Database:
    """Owns the engine; hands out read sessions and write transactions.

    ``sessions()`` is for reads that must see one snapshot. ``reads()`` is for the hot
    paths' reads of one statement each: no BEGIN and no ROLLBACK, so a read is one round
    trip (each statement is its own transaction; two statements may see different
    snapshots); ``read_statement`` runs such reads on a sync connection, on SQLite right on
    the event loop's thread. ``transaction()`` is one unit of work that commits on success.
    On SQLite, write transactions of this process also queue on an asyncio lock: waiting
    there costs nothing, while waiting in SQLite's busy handler means sleeping.
    """

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        # Every session knows its Database (``Database.of``): code handed only a session can
        # still reach this Database's process-local objects.
        info = {_DATABASE_KEY: self}
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False, info=info)
        if self.engine.dialect.name == "sqlite":
            self._autocommit = self.engine.execution_options(
                **{SQLITE_BEGIN: None, AUTOCOMMIT: True}
            )
        else:
            self._autocommit = self.engine.execution_options(
                isolation_level="AUTOCOMMIT", **{AUTOCOMMIT: True}
            )
        self.reads = async_sessionmaker(self._autocommit, expire_on_commit=False, info=info)
        self._write_lock: asyncio.Lock | None = None
        self._writer = self.engine
        self._write_sessions = self.sessions
        self._batch_writer: SqliteBatchWriter | None = None
        self._locals: dict[ProcessLocal[Any], object] = {}
        if self.engine.dialect.name == "sqlite":
            self._write_lock = asyncio.Lock()
            self._writer = self.engine.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
            self._write_sessions = async_sessionmaker(
                self._writer, expire_on_commit=False, info=info
            )
            path = self.engine.url.database
            if path not in (None, "", ":memory:"):
                self._batch_writer = SqliteBatchWriter(self.engine, path)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def sync_engines(self) -> list[Engine]:
        """Every engine this Database talks through, to watch their events (the SQLite batch
        writer has its own)."""
        engines = [self.engine.sync_engine]
        if self._batch_writer is not None:
            engines.append(self._batch_writer.engine)
        return engines

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

    async def run_statement(self, work: Callable[[Connection], Result]) -> Result:
        """Run ``work`` without BEGIN and COMMIT: each of its statements is atomic on its
        own, so this saves their round trips. For work of one write statement (and reads
        that need no snapshot shared with it). Like ``run_batch`` otherwise (the same
        connection and write lock on SQLite)."""
        if self._write_lock is None:
            async with self._autocommit.connect() as connection:
                return await connection.run_sync(work)
        async with self._write_lock:
            if self._batch_writer is not None:
                return await self._batch_writer.run(work, autocommit=True)
            async with self._autocommit.connect() as connection:
                return await connection.run_sync(work)

    async def read_statement(self, work: Callable[[Connection], Result]) -> Result:
        """``work``'s reads, each statement its own transaction (no BEGIN, no snapshot shared
        between them), on a sync connection: the hot paths' point reads. On a SQLite file
        they run on the event loop's thread (``SqliteBatchWriter.read``); ``work`` must
        fetch every row it asks for, so no read stays open."""
        if self._batch_writer is not None:
            return await self._batch_writer.read(work)
        async with self._autocommit.connect() as connection:
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
