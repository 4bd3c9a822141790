"""Balance reads of a monitor pass in batches across shards (``monitor.passes``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from invoicing.chain.gateway import ChainGateway
from invoicing.monitor.check import PARALLEL_READS

# A row of a pass (``passes.PASS_COLUMNS``), and what stores a batch's readings.
PassRow = Any
Store = Callable[[Sequence[PassRow], Sequence[int | None]], Awaitable[None]]


class Batches:
    """Rows waiting for their read, per token; a full batch is read (then stored) at once,
    ``PARALLEL_READS`` at a time, overlapping the next query; ``add`` waits while many are in
    flight, so a pass holds a few batches of rows, not a whole chain."""

    def __init__(self, chain: ChainGateway, block: int, batch_size: int, store: Store) -> None:
        self.chain = chain
        self.block = block
        self.batch_size = batch_size
        self.store = store
        self._waiting: dict[str | None, list[PassRow]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(PARALLEL_READS)

    async def add(self, rows: Sequence[PassRow]) -> None:
        for row in rows:
            token = cast(str | None, row.token_address)
            group = self._waiting.setdefault(token, [])
            group.append(row)
            if len(group) >= self.batch_size:
                self._start(token, group)
                self._waiting[token] = []
        while len(self._tasks) > 2 * PARALLEL_READS:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def finish(self) -> None:
        for token, group in self._waiting.items():
            if group:
                self._start(token, group)
        self._waiting.clear()
        while self._tasks:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def close(self) -> None:
        """Stop reads still running (after a failure) and collect their outcomes."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _collect(self, done: set[asyncio.Task[None]]) -> None:
        self._tasks -= done
        for task in done:
            task.result()  # the first failure fails the pass

    def _start(self, token: str | None, rows: list[PassRow]) -> None:
        self._tasks.add(asyncio.ensure_future(self._read(token, rows)))

    async def _read(self, token: str | None, rows: list[PassRow]) -> None:
        async with self._gate:
            addresses = [row.payment_address for row in rows]
            readings = await self.chain.balances(token, addresses, self.block)
        await self.store(rows, readings)
