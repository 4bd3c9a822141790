"""Balance reads of a monitor pass in batches across shards (``monitor.passes``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from invoicing.chain.gateway import ChainGateway
from invoicing.monitor.check import PARALLEL_READS

# A row of a pass (``scan.PASS_COLUMNS``), and what stores a batch's readings: the
# addresses read, what was added with each (``add``), and their readings.
PassRow = Any
Store = Callable[[list[str], list[Any], Sequence[int | None]], Awaitable[None]]


class Batches:
    """Escrows waiting for their read, per token, each with a tag (its row, or what the
    pass needs of it); a full batch is read (then stored) at once, ``PARALLEL_READS`` at a
    time, overlapping the next query; ``add`` waits while many are in flight, so a pass holds
    a few batches, not a whole chain."""

    def __init__(self, chain: ChainGateway, block: int, batch_size: int, store: Store) -> None:
        self.chain = chain
        self.block = block
        self.batch_size = batch_size
        self.store = store
        self._addresses: dict[str | None, list[str]] = {}
        self._tags: dict[str | None, list[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(PARALLEL_READS)

    async def add_rows(self, rows: Sequence[PassRow]) -> None:
        """Full rows (tagged with themselves)."""
        by_token: dict[str | None, list[PassRow]] = {}
        for row in rows:
            by_token.setdefault(cast(str | None, row.token_address), []).append(row)
        for token, group in by_token.items():
            self.add(token, [row.payment_address for row in group], group)
        await self.wait()

    def add(self, token: str | None, addresses: list[str], tags: list[Any]) -> None:
        """Escrows of ``token`` with one tag each; starts the reads of full batches."""
        waiting = self._addresses.setdefault(token, [])
        tagged = self._tags.setdefault(token, [])
        waiting += addresses
        tagged += tags
        size = self.batch_size
        while len(waiting) >= size:
            self._start(token, waiting[:size], tagged[:size])
            del waiting[:size], tagged[:size]

    async def wait(self) -> None:
        """Wait while many reads are in flight."""
        while len(self._tasks) > 2 * PARALLEL_READS:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def finish(self) -> None:
        for token, waiting in self._addresses.items():
            if waiting:
                self._start(token, waiting, self._tags[token])
        self._addresses.clear()
        self._tags.clear()
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

    def _start(self, token: str | None, addresses: list[str], tags: list[Any]) -> None:
        self._tasks.add(asyncio.ensure_future(self._read(token, addresses, tags)))

    async def _read(self, token: str | None, addresses: list[str], tags: list[Any]) -> None:
        async with self._gate:
            readings = await self.chain.balances(token, addresses, self.block)
        await self.store(addresses, tags, readings)
