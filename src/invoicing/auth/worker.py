"""Housekeeping for request authentication: forget replay keys that have expired."""

from __future__ import annotations

import asyncio
import contextlib

from invoicing.auth.guard import purge_used_timestamps
from invoicing.services import Services

PURGE_INTERVAL_S = 60.0


async def run(services: Services, stop: asyncio.Event) -> None:
    """Every minute, delete (owner, timestamp) replay keys that can no longer pass the
    ±5 minute window, so the table stays as small as the window."""
    while not stop.is_set():
        await purge_used_timestamps(services.db, services.clock.now_ms())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=PURGE_INTERVAL_S)
