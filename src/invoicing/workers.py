"""Background workers (monitor, webhooks, withdrawals, relayer) run as asyncio tasks.

Each worker is ``async def run(services, stop: asyncio.Event) -> None`` and must return
promptly once ``stop`` is set. They claim work with row locks, so any number of processes
may run them against one PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

# What a final refund means is registered when its domain is imported
# (``settlement.finality``); a process that only runs the workers follows them too.
import invoicing.refunds.service  # noqa: F401
from invoicing import housekeeping
from invoicing.monitor import worker as monitor
from invoicing.notifications import worker as webhooks
from invoicing.notifications.mail import worker as mail
from invoicing.payments import registry as payment_methods
from invoicing.services import Services
from invoicing.settlement import worker as settlement

log = logging.getLogger(__name__)

Worker = Callable[[Services, asyncio.Event], Awaitable[None]]

# Every payment method's final transactions, known to every process that follows them.
payment_methods.register()


def all_workers() -> list[Worker]:
    """Every worker the service runs. Each domain contributes its loop here."""
    loops = [monitor.run, webhooks.run, mail.run, settlement.run, housekeeping.run]
    return [*loops, *payment_methods.worker_loops()]


async def run_workers(
    services: Services, stop: asyncio.Event, workers: list[Worker] | None = None
) -> None:
    """Run every worker until ``stop`` is set; a crashed worker is logged and restarted."""
    await asyncio.gather(*(_supervise(w, services, stop) for w in workers or all_workers()))


async def _supervise(worker: Worker, services: Services, stop: asyncio.Event) -> None:
    name = getattr(worker, "__module__", repr(worker))
    while not stop.is_set():
        try:
            await worker(services, stop)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a worker must never take the process down
            log.exception("worker %s crashed; restarting in 1 s", name)
            try:
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            except TimeoutError:
                pass
