"""Waiting out a database outage: one probe per process, shared by every worker that waits.

A worker step that failed because the database could not be reached (``db.is_connection_loss``)
waits before it tries again. A backoff alone, doubling to its cap, left the workers asleep
for up to the cap after the database came back (a 30 s cut was followed by 20 s of nothing).
So the wait also ends as soon as the database answers again: while anyone waits, one task of
the process (``OutageProbe``) asks it ``SELECT 1`` every ``PROBE_S``, on a connection of its
own, and wakes every waiter at the first answer. The probe costs one connection attempt per
``PROBE_S`` and process during an outage, however many workers wait.
"""

from __future__ import annotations

import asyncio
import contextlib

from sqlalchemy import text

from invoicing.db import Database, ProcessLocal

# Seconds between probes, and the longest one probe may take (a connect to an unreachable
# host can hang far longer).
PROBE_S = 0.5
PROBE_TIMEOUT_S = 2.0


class OutageProbe:
    """This process's probe of one Database while workers wait for it to answer."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._answered = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, delay_s: float, stop: asyncio.Event | None = None) -> None:
        """Wait ``delay_s``, or less: until the database answers a probe (or ``stop`` is
        set)."""
        if self._task is None or self._task.done():
            self._answered = asyncio.Event()
            self._task = asyncio.create_task(self._probe(self._answered))
        waiters = [asyncio.ensure_future(self._answered.wait())]
        if stop is not None:
            waiters.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waiters, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _probe(self, answered: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(PROBE_S)
            try:
                async with asyncio.timeout(PROBE_TIMEOUT_S), self.db.engine.connect() as c:
                    await c.execute(text("SELECT 1"))
            except Exception:  # noqa: BLE001 - any failure means: not yet
                continue
            answered.set()
            return

    async def aclose(self) -> None:
        """Stop probing (the Database is disposed)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


PROBES: ProcessLocal[OutageProbe] = ProcessLocal(OutageProbe)


async def wait_for_database(
    db: Database, delay_s: float, stop: asyncio.Event | None = None
) -> None:
    """After a step failed on a lost database: wait ``delay_s`` (the caller's backoff) or
    until the database answers again, whichever comes first."""
    await PROBES.of(db).wait(delay_s, stop)
