"""Balance reads of a monitor pass in batches across shards and assets (``monitor.passes``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from invoicing.chain.calldata import PackedAccounts
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reader import CALL_GAS, READ_GAS, account_gas
from invoicing.monitor.check import PARALLEL_READS

# A row of a pass (``scan.PASS_COLUMNS``), and what stores a batch's readings: the
# escrows read, what was added with each (``Batches.add``) and their readings, in one order.
PassRow = Any
Store = Callable[[Sequence[str], list[Any], Sequence[int | None]], Awaitable[None]]
# Escrows of one asset in a batch, with their tags.
Segment = tuple[str | None, Sequence[str], Sequence[Any]]


def joined(parts: Sequence[Sequence[str]]) -> Sequence[str]:
    """Addresses one after the other; ``PackedAccounts`` stay packed (no step per address)."""
    if all(isinstance(part, PackedAccounts) for part in parts):
        return PackedAccounts(b"".join(cast(PackedAccounts, part).packed for part in parts))
    return [address for part in parts for address in part]


class Batches:
    """Escrows waiting for their read, of every asset together, each with a tag (its row, or
    what the pass needs of it); a batch is read (then stored) as soon as it is full: its
    estimated gas reaches ``read_gas`` (one EscrowReader call reads every asset of it,
    ``ChainGateway.read_escrows``).
    ``PARALLEL_READS`` reads run at a time, overlapping the next query; ``wait`` holds the
    caller while many are in flight, so a pass holds a few batches, not a whole chain."""

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
        self._waiting: list[Segment] = []
        self._gas = CALL_GAS
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(PARALLEL_READS)

    async def add_rows(self, rows: Sequence[PassRow]) -> None:
        """Full rows, each its own tag."""
        by_token: dict[str | None, list[PassRow]] = {}
        for row in rows:
            by_token.setdefault(cast(str | None, row.token_address), []).append(row)
        for token, group in by_token.items():
            self.add(token, [row.payment_address for row in group], group)
        await self.wait()

    def add(self, token: str | None, addresses: Sequence[str], tags: Sequence[Any]) -> None:
        """Escrows of ``token``, one tag each; starts the reads of the batches they fill."""
        gas = account_gas(token)
        start = 0
        while start < len(addresses):
            room = (self.read_gas - self._gas) // gas
            if room <= 0 and self._waiting:
                self._start()
                continue
            end = min(len(addresses), start + max(room, 1))
            self._waiting.append((token, addresses[start:end], tags[start:end]))
            self._gas += gas * (end - start)
            start = end

    async def wait(self) -> None:
        """Wait while many reads are in flight."""
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
        segments, self._waiting, self._gas = self._waiting, [], CALL_GAS
        self._tasks.add(asyncio.ensure_future(self._read(segments)))

    async def _read(self, segments: list[Segment]) -> None:
        """One read of every asset of ``segments``; stored in the order of the assets."""
        by_token: dict[str | None, tuple[list[Sequence[str]], list[Any]]] = {}
        for token, addresses, tags in segments:
            waiting, tagged = by_token.setdefault(token, ([], []))
            waiting.append(addresses)
            tagged += tags
        groups = [(token, joined(parts)) for token, (parts, _tags) in by_token.items()]
        async with self._gate:
            values = await self.chain.read_escrows(groups, self.block)
        tags, readings = [], []
        for (_parts, tagged), group_values in zip(by_token.values(), values, strict=True):
            tags += tagged
            readings += group_values
        addresses = joined([accounts for _token, accounts in groups])
        if len(readings) != len(addresses):
            raise ValueError("the read answered another number of escrows than asked")
        await self.store(addresses, tags, readings)
