"""Balance reads of a monitor pass in batches across shards and assets (``monitor.passes``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reader import CALL_GAS, READ_GAS, account_gas
from invoicing.monitor.check import PARALLEL_READS

# A row of a pass (``passes.PASS_COLUMNS``), and what stores a batch's readings.
PassRow = Any
Store = Callable[[Sequence[PassRow], Sequence[int | None]], Awaitable[None]]


class Batches:
    """Rows waiting for their read, of every asset together; a batch is read (then stored) as
    soon as it is full: its estimated gas reaches ``read_gas`` (one EscrowReader call reads
    every asset of it, ``ChainGateway.read_escrows``).
    ``PARALLEL_READS`` reads run at a time, overlapping the next query; ``add`` waits while
    many are in flight, so a pass holds a few batches of rows, not a whole chain."""

    def __init__(
        self,
        chain: ChainGateway,
        block: int,
        store: Store,
        read_gas: int = READ_GAS,
    ) -> None:
        self.chain = chain
        self.block = block
        self.read_gas = read_gas
        self.store = store
        self._waiting: list[PassRow] = []
        self._gas = CALL_GAS
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(PARALLEL_READS)

    async def add(self, rows: Sequence[PassRow]) -> None:
        for row in rows:
            gas = account_gas(cast(str | None, row.token_address))
            if self._waiting and self._gas + gas > self.read_gas:
                self._start()
            self._waiting.append(row)
            self._gas += gas
        while len(self._tasks) > 2 * PARALLEL_READS:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def finish(self) -> None:
        if self._waiting:
            self._start()
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

    def _start(self) -> None:
        rows, self._waiting, self._gas = self._waiting, [], CALL_GAS
        self._tasks.add(asyncio.ensure_future(self._read(rows)))

    async def _read(self, rows: list[PassRow]) -> None:
        """One read of every asset of ``rows``; the readings are stored in the rows' order."""
        by_token: dict[str | None, list[int]] = {}
        for index, row in enumerate(rows):
            by_token.setdefault(cast(str | None, row.token_address), []).append(index)
        groups = [
            (token, [rows[i].payment_address for i in indexes])
            for token, indexes in by_token.items()
        ]
        async with self._gate:
            values = await self.chain.read_escrows(groups, self.block)
        readings: list[int | None] = [None] * len(rows)
        for indexes, group_values in zip(by_token.values(), values, strict=True):
            for index, value in zip(indexes, group_values, strict=True):
                readings[index] = value
        await self.store(rows, readings)
