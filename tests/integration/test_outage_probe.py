"""Waiting out a database outage (``invoicing.outage``): a worker's wait after a lost
database ends as soon as the database answers again, however long its backoff; every waiter
of a process shares one probe; ``stop`` ends the wait."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from invoicing.db import Database
from invoicing.outage import PROBES, wait_for_database


async def test_the_wait_ends_once_the_database_answers_again(tmp_path: Path) -> None:
    # A SQLite file in a folder that is not there yet: every connection fails until it is.
    folder = tmp_path / "later"
    database = Database(f"sqlite:///{folder}/d.db")
    try:
        async with database.engine.connect():
            pass
        raise AssertionError("the database should be unreachable")
    except SQLAlchemyError:
        pass
    started = time.monotonic()
    waiters = [asyncio.ensure_future(wait_for_database(database, 60.0)) for _ in range(5)]
    await asyncio.sleep(1.2)
    assert not any(w.done() for w in waiters)  # still down: nobody wakes
    probe = PROBES.of(database)._task
    folder.mkdir()

    await asyncio.wait_for(asyncio.gather(*waiters), 10)

    assert time.monotonic() - started < 5  # not the 60 s backoff
    assert probe is not None and probe.done()  # one probe served them all, and stopped
    await database.dispose()


async def test_the_wait_ends_at_its_delay_or_at_stop_while_the_database_is_down(
    tmp_path: Path,
) -> None:
    database = Database(f"sqlite:///{tmp_path}/missing/d.db")
    started = time.monotonic()
    await wait_for_database(database, 0.3)
    waited = time.monotonic() - started
    stop = asyncio.Event()
    stop.set()
    started = time.monotonic()
    await wait_for_database(database, 60.0, stop)

    assert 0.3 <= waited < 2
    assert time.monotonic() - started < 1
    await database.dispose()  # stops the probe that still runs
    assert PROBES.of(database)._task is not None and PROBES.of(database)._task.done()
