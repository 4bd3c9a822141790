"""Housekeeping: every minute, delete what can no longer matter.

- replay keys of signed requests that can no longer pass the time window
  (``auth.guard.purge_used_timestamps``);
- rate-limit counters of windows that are over (``ratelimit.purge_windows``);
- finished webhook events and their attempts past ``webhook_event_retention_s``
  (``notifications.retention.prune_finished_events``);
- events past the same retention (``notifications.retention.prune_events``), and sent or
  failed mail (``notifications.retention.prune_finished_mail``);
- the relayer's spend counts of days before yesterday (``settlement.budget.purge_spend``);
- expired dashboard sign-in tickets, and sessions a day past their end
  (``auth.sign_in.purge_sign_in``).

The request paths never delete: each table stays as small as its window because of this
loop. Each step fails alone (logged, tried again next round), never the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable

from invoicing.auth.guard import purge_used_timestamps
from invoicing.auth.sign_in import purge_sign_in
from invoicing.db import Database
from invoicing.notifications.retention import (
    prune_events,
    prune_finished_events,
    prune_finished_mail,
)
from invoicing.ratelimit import purge_windows
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.budget import purge_spend

log = logging.getLogger(__name__)

PURGE_INTERVAL_S = 60.0

Step = Callable[[Database, int], Awaitable[object]]
STEPS: tuple[Step, ...] = (purge_used_timestamps, purge_windows, purge_spend, purge_sign_in)


def steps(settings: Settings) -> tuple[Step, ...]:
    """Every step, the configured ones bound to their settings."""
    retention_ms = int(settings.webhook_event_retention_s * 1000)
    prune = functools.partial(prune_finished_events, retention_ms=retention_ms)
    prune_old_events = functools.partial(prune_events, retention_ms=retention_ms)
    prune_mail = functools.partial(prune_finished_mail, retention_ms=retention_ms)
    return (
        *STEPS,
        functools.update_wrapper(prune, prune_finished_events),
        functools.update_wrapper(prune_old_events, prune_events),
        functools.update_wrapper(prune_mail, prune_finished_mail),
    )


async def run(services: Services, stop: asyncio.Event) -> None:
    """Run every step, then wait a minute (or until ``stop``)."""
    while not stop.is_set():
        await run_once(services)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=PURGE_INTERVAL_S)


async def run_once(services: Services) -> None:
    """One round of every step; a step that fails is logged and the others still run."""
    now_ms = services.clock.now_ms()
    for step in steps(services.settings):
        try:
            await step(services.db, now_ms)
        except Exception:  # noqa: BLE001 - one failed step must not stop the others
            log.exception("housekeeping step %s failed; retrying next round", step.__name__)
