"""Database engine and sessions (SQLAlchemy 2 async; SQLite default, PostgreSQL in production)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine, MetaData, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import make_url
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
        # No pre-ping (a round trip per checkout); recycle instead so stale connections go.
        kwargs["pool_recycle"] = 1800
    engine = create_async_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        _tune_sqlite(engine.sync_engine)
    return engine


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Several workers share one file: WAL lets readers go on while one writer commits.
        # Leave transaction control to us (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        # WAL + NORMAL: a commit survives a crash of the process (not of the OS); the
        # production database is PostgreSQL.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Write transactions take the write lock up front (BEGIN IMMEDIATE), so a
        # read-then-write transaction never fails on a lock upgrade; reads stay deferred and
        # never wait for writers.
        mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


SQLITE_BEGIN = "invoicing_sqlite_begin"

Result = TypeVar("Result")


class Database:
    """Owns the engine; hands out read sessions and write transactions.

    ``sessions()`` is for reads. ``transaction()`` is one unit of work that commits on
    success. On SQLite, write transactions of this process also queue on an asyncio lock:
    waiting there costs nothing, while waiting in SQLite's busy handler means sleeping.
    """

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock: asyncio.Lock | None = None
        self._writer = self.engine
        self._write_sessions = self.sessions
        self._batch_writer: Engine | None = None
        if self.engine.dialect.name == "sqlite":
            self._write_lock = asyncio.Lock()
            self._writer = self.engine.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
            self._write_sessions = async_sessionmaker(self._writer, expire_on_commit=False)
            if self.engine.url.database not in (None, "", ":memory:"):
                self._batch_writer = _sqlite_batch_engine(self.engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

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
        async driver as usual. On SQLite the whole transaction runs in one worker thread on
        the stdlib driver: through aiosqlite every statement costs three or four hand-offs
        between threads, which cost more than SQLite's own work for a batch of inserts."""
        if self._write_lock is None:
            async with self._writer.begin() as connection:
                return await connection.run_sync(work)
        async with self._write_lock:
            if self._batch_writer is not None:
                return await asyncio.to_thread(_run_in_transaction, self._batch_writer, work)
            async with self._writer.begin() as connection:
                return await connection.run_sync(work)

    async def dispose(self) -> None:
        if self._batch_writer is not None:
            self._batch_writer.dispose()
        await self.engine.dispose()


def _sqlite_batch_engine(engine: AsyncEngine) -> Engine:
    """A stdlib-driver engine on the same SQLite file, tuned like the async one; its
    transactions take the write lock up front (BEGIN IMMEDIATE)."""
    url = engine.url.set(drivername="sqlite+pysqlite")
    sync = create_sync_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
    _tune_sqlite(sync)
    return sync.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})


def _run_in_transaction(engine: Engine, work: Callable[[Connection], Result]) -> Result:
    with engine.begin() as connection:
        return work(connection)


Item = TypeVar("Item")
Outcome = TypeVar("Outcome")


class GroupCommit(Generic[Item, Outcome]):
    """Runs concurrently submitted items together, one batch (one transaction) at a time.

    ``run`` gets a batch and returns one outcome per item, in order: a value, or the
    exception that item's submitter should see. Items that arrive while a batch runs form
    the next batch, so under load one transaction serves many requests and at rest a batch
    is a single item (no waiting for company). If ``run`` itself raises, every item of the
    batch gets that exception (``run`` is expected to isolate per-item failures itself).
    """

    def __init__(
        self,
        run: Callable[[Sequence[Item]], Awaitable[Sequence[Outcome | Exception]]],
        max_batch: int = 200,
    ) -> None:
        self._run = run
        self._max_batch = max_batch
        self._pending: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Outcome:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        drainer = self._drainer
        if drainer is None or drainer.done() or drainer.get_loop() is not future.get_loop():
            self._drainer = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            outcomes: Sequence[Outcome | Exception]
            try:
                outcomes = await self._run([item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 - handed to every submitter
                outcomes = [exc] * len(batch)
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                raise
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
