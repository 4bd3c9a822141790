"""Coalescing concurrent requests of one process into batches (see ``Coalescer``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")


class Coalescer(Generic[Item, Outcome]):
    """Runs concurrently submitted items together, one batch at a time: one transaction for
    the writes of many requests (invoice creates, replay keys), one query or one chain read
    for many lookups (status lookups, live re-checks).

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
