"""Background workers (monitor, webhooks, withdrawals, relayer) run as asyncio tasks.

Each worker is ``async def run(services, stop: asyncio.Event) -> None`` and must return
promptly once ``stop`` is set. They claim work with row locks, so any number of processes
may run them against one PostgreSQL database.

A stop (``Ctrl-C``, SIGTERM, the app shutting down) lets each worker finish the step under way
for at most ``STOP_GRACE_S``; one still running then is cancelled. Every step is safe to cut
short, as a crash would: claims and leases lapse, and what was not committed is done again
by the next start. Without the bound a step that waits on the network (a node that hangs up
to the RPC client's timeout on each attempt, a slow webhook endpoint) held the stop for as
long as it took.
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

# How long a worker may take to return once ``stop`` is set before it is cancelled.
STOP_GRACE_S = 5.0

# Every payment method's final transactions, known to every process that follows them.
payment_methods.register()


def all_workers() -> list[Worker]:
    """Every worker the service runs. Each domain contributes its loop here."""
    loops = [monitor.run, webhooks.run, mail.run, settlement.run, housekeeping.run]
    return [*loops, *payment_methods.worker_loops()]


async def run_workers(
    services: Services,
    stop: asyncio.Event,
    workers: list[Worker] | None = None,
    grace_s: float | None = None,
) -> None:
    """Run every worker until ``stop`` is set; a crashed worker is logged and restarted.
    Once ``stop`` is set, a worker that has not returned within ``grace_s`` (default
    ``STOP_GRACE_S``) is cancelled."""
    grace_s = STOP_GRACE_S if grace_s is None else grace_s
    tasks = {
        asyncio.create_task(_supervise(w, services, stop), name=_name_of(w))
        for w in workers or all_workers()
    }
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():  # else a worker died of an error its supervisor does not catch
            _, late = await asyncio.wait(tasks, timeout=grace_s)
            for name in sorted(task.get_name() for task in late):
                log.warning("worker %s did not stop within %.1f s; cancelled", name, grace_s)
    finally:
        for task in (*tasks, stopping):
            task.cancel()
        outcomes = await asyncio.gather(*tasks, stopping, return_exceptions=True)
    for outcome in outcomes:  # a worker that ended on its own with an error (not a crash)
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


def _name_of(worker: Worker) -> str:
    return str(getattr(worker, "__module__", repr(worker)))


async def _supervise(worker: Worker, services: Services, stop: asyncio.Event) -> None:
    name = _name_of(worker)
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
