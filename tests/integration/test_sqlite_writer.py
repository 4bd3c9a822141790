"""SQLite's hot write path (``Database.run_batch``): it runs on the event loop's thread, waits
for another process's write lock in a worker thread, and leaves WAL checkpoints to a
background thread. These are properties of the SQLite file itself, so they run on SQLite
whatever database the rest of the suite uses."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from invoicing.db import Checkpointer, Database

pytestmark = pytest.mark.integration


def create_table(connection: Connection) -> None:
    connection.exec_driver_sql("CREATE TABLE t (x INTEGER, filler TEXT)")


def insert(value: int) -> object:
    def work(connection: Connection) -> int:
        return connection.exec_driver_sql("INSERT INTO t (x) VALUES (?)", (value,)).rowcount

    return work


@pytest.mark.parametrize("run", ["run_batch", "run_statement"])
async def test_a_write_waits_for_another_process_write_lock_without_stalling_the_loop(
    tmp_path: Path, run: str
) -> None:
    """A batch (its BEGIN IMMEDIATE) and a lone statement (the rate-limit counts, an API
    key's last use) alike: another process's write lock is waited for, never a 503."""
    path = tmp_path / "writer.db"
    db = Database(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await db.run_batch(create_table)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t (x) VALUES (1)")

        batch = asyncio.create_task(getattr(db, run)(insert(2)))
        started = time.monotonic()
        for _ in range(20):
            await asyncio.sleep(0.01)
        loop_ran_for = time.monotonic() - started
        assert not batch.done()  # still waiting for the lock...
        assert loop_ran_for < 1  # ...while the event loop went on

        other.execute("COMMIT")
        assert await asyncio.wait_for(batch, timeout=10) == 1
        assert sorted(row[0] for row in other.execute("SELECT x FROM t")) == [1, 2]
        assert await getattr(db, run)(insert(3)) == 1  # the writer's connection is usable after
    finally:
        other.close()
        await db.dispose()


def select_all(connection: Connection) -> list[int]:
    return [row[0] for row in connection.exec_driver_sql("SELECT x FROM t ORDER BY x")]


async def test_reads_run_on_the_loop_thread_and_see_every_commit(tmp_path: Path) -> None:
    """``read_statement`` reads on the event loop's thread, never in a read transaction left
    open: it sees what another process committed just before, and a writer goes on after."""
    path = tmp_path / "reads.db"
    db = Database(f"sqlite:///{path}")
    other = sqlite3.connect(path, isolation_level=None)
    threads: list[str] = []

    def on_which_thread(connection: Connection) -> list[int]:
        threads.append(threading.current_thread().name)
        return select_all(connection)

    try:
        await db.run_batch(create_table)
        assert await db.read_statement(on_which_thread) == []
        other.execute("INSERT INTO t (x) VALUES (1)")
        assert await db.read_statement(on_which_thread) == [1]
        await db.run_statement(insert(2))
        assert await db.read_statement(on_which_thread) == [1, 2]
        assert threads == [threading.current_thread().name] * 3
        # No read left a snapshot open: a RESTART checkpoint finds no reader to wait for
        # (once the background checkpointer, woken by the write, is done).
        busy = 1
        for _ in range(50):
            busy = other.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0]
            if not busy:
                break
            await asyncio.sleep(0.05)
        assert busy == 0
    finally:
        other.close()
        await db.dispose()


async def test_a_read_answered_busy_is_read_again_in_a_worker_thread(tmp_path: Path) -> None:
    """SQLite answers a WAL read busy only in rare moments (another process recovering the
    log, or holding the file in exclusive locking mode): the read is run again in a worker
    thread, on a connection of its own that waits for the lock, and the loop's reader stays
    usable."""
    db = Database(f"sqlite:///{tmp_path / 'busy.db'}")
    await db.run_batch(create_table)
    await db.run_statement(insert(7))
    threads: list[str] = []

    def busy_once(connection: Connection) -> list[int]:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise busy
        return select_all(connection)

    try:
        assert await db.read_statement(busy_once) == [7]
        assert threads[0] == threading.current_thread().name != threads[1]
        assert await db.read_statement(select_all) == [7]
        # Any other error is the read's own: raised as it is.
        with pytest.raises(OperationalError, match="no such table"):
            await db.read_statement(lambda c: c.exec_driver_sql("SELECT * FROM absent").all())
    finally:
        await db.dispose()


async def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "writer.db"
    db = Database(f"sqlite:///{path}")
    try:
        await db.run_batch(create_table)

        def insert_then_fail(connection: Connection) -> None:
            connection.exec_driver_sql("INSERT INTO t (x) VALUES (1)")
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            await db.run_batch(insert_then_fail)
        with sqlite3.connect(path) as reader:
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)
    finally:
        await db.dispose()


async def test_batch_commits_leave_the_checkpoint_to_the_background_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "writer.db"
    db = Database(f"sqlite:///{path}")
    try:
        autocheckpoint = await db.run_batch(
            lambda connection: connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        )
        assert autocheckpoint == 0
        await db.run_batch(create_table)
        size_before = path.stat().st_size

        def fill(connection: Connection) -> None:
            rows = [(i, "x" * 500) for i in range(4000)]
            connection.exec_driver_sql("INSERT INTO t (x, filler) VALUES (?, ?)", rows)

        await db.run_batch(fill)  # about 2 MB of log, past SQLite's 1000-page default

        for _ in range(200):  # up to 10 s
            if path.stat().st_size >= size_before + 1_500_000:
                break
            await asyncio.sleep(0.05)
        assert path.stat().st_size >= size_before + 1_500_000  # copied into the file
        with sqlite3.connect(path) as reader:
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (4000,)
    finally:
        await db.dispose()


def test_the_log_starts_over_under_steady_writes(tmp_path: Path) -> None:
    """Back-to-back commits never leave the log fully copied, which is when SQLite would
    start it over; the checkpointer's RESTART checkpoints keep it bounded anyway."""
    path = tmp_path / "writer.db"
    wal = tmp_path / "writer.db-wal"
    writer = sqlite3.connect(path, isolation_level=None, timeout=30)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # as the batch writer's connections
    writer.execute("CREATE TABLE t (x INTEGER, filler TEXT)")
    checkpointer = Checkpointer(str(path), interval=0.01, restart_pages=250)
    try:
        largest = 0
        for batch in range(400):  # about 25 MB of log in all
            writer.execute("BEGIN IMMEDIATE")
            rows = [(batch, "x" * 500) for _ in range(100)]
            writer.executemany("INSERT INTO t (x, filler) VALUES (?, ?)", rows)
            writer.execute("COMMIT")
            checkpointer.wake()
            largest = max(largest, wal.stat().st_size)
            time.sleep(0.001)

        # Without the checkpointer the log would hold all ~25 MB; under a loaded CI machine the
        # checkpointer thread runs late, so the bound leaves room for a few slow wake-ups.
        assert largest < 15_000_000
        assert writer.execute("SELECT count(*) FROM t").fetchone() == (40_000,)
    finally:
        checkpointer.stop()
        writer.close()


def test_a_slow_reader_in_another_process_never_stalls_writers_behind_a_restart(
    tmp_path: Path,
) -> None:
    """A RESTART checkpoint holds the write lock while it waits for readers of the old log;
    with a reader that keeps its snapshot open (another process, busy or slow), writers
    would wait as long as the checkpoint does. It gives up after a moment instead."""
    path = tmp_path / "writer.db"
    writer = sqlite3.connect(path, isolation_level=None, timeout=30)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x INTEGER, filler TEXT)")
    reader = sqlite3.connect(path, isolation_level=None)
    checkpointer = Checkpointer(str(path), interval=0.01, restart_pages=10)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)  # holds its snapshot
        slowest = 0.0
        for batch in range(20):
            started = time.monotonic()
            writer.execute("BEGIN IMMEDIATE")
            writer.executemany(
                "INSERT INTO t (x, filler) VALUES (?, ?)", [(batch, "x" * 500) for _ in range(50)]
            )
            writer.execute("COMMIT")
            slowest = max(slowest, time.monotonic() - started)
            checkpointer.wake()
            time.sleep(0.02)

        assert slowest < 5.0  # 30 s (the busy timeout) when the checkpoint waits for the reader
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)  # its snapshot
        reader.execute("COMMIT")
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (1000,)
    finally:
        checkpointer.stop()
        reader.close()
        writer.close()
