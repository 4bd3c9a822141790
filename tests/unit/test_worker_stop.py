"""A stop of the workers (Ctrl-C, SIGTERM, the app shutting down) is prompt: each worker may
finish its step for the grace, then it is cancelled (``invoicing.workers``)."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from invoicing.services import Services
from invoicing.workers import run_workers

NO_SERVICES = cast(Services, None)  # the workers below use none


async def test_a_worker_still_busy_after_the_grace_is_cancelled_and_the_others_end() -> None:
    """The step that holds the stop: one that waits on something that does not answer (a
    node hanging on a call, up to the RPC client's timeout on each attempt)."""
    cut_short = asyncio.Event()
    finished: list[str] = []

    async def busy(_services: Services, _stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)  # its step does not look at ``stop``
        except asyncio.CancelledError:
            cut_short.set()
            raise

    async def prompt(_services: Services, stop: asyncio.Event) -> None:
        await stop.wait()
        finished.append("prompt")

    stop = asyncio.Event()
    running = asyncio.create_task(run_workers(NO_SERVICES, stop, [busy, prompt], grace_s=0.3))
    await asyncio.sleep(0.05)
    stop.set()
    stopping = time.monotonic()
    await asyncio.wait_for(running, 30)

    assert 0.25 <= time.monotonic() - stopping < 2
    assert cut_short.is_set()
    assert finished == ["prompt"]


async def test_workers_that_return_at_the_stop_are_not_held_for_the_grace() -> None:
    async def prompt(_services: Services, stop: asyncio.Event) -> None:
        await stop.wait()

    stop = asyncio.Event()
    running = asyncio.create_task(run_workers(NO_SERVICES, stop, [prompt, prompt], grace_s=30))
    await asyncio.sleep(0.05)
    stop.set()
    stopping = time.monotonic()
    await asyncio.wait_for(running, 30)

    assert time.monotonic() - stopping < 2


async def test_cancelling_the_workers_cancels_every_worker() -> None:
    """What a caller that stops waiting does (``asyncio.wait_for``): no worker outlives it."""
    cancelled: list[str] = []

    async def worker(_services: Services, stop: asyncio.Event) -> None:
        try:
            await stop.wait()
        except asyncio.CancelledError:
            cancelled.append("worker")
            raise

    running = asyncio.create_task(run_workers(NO_SERVICES, asyncio.Event(), [worker, worker]))
    await asyncio.sleep(0.05)
    running.cancel()
    done, _ = await asyncio.wait({running}, timeout=30)

    assert done and running.cancelled()
    assert cancelled == ["worker", "worker"]
