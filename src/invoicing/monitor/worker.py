"""The monitor worker: one loop per chain, polling the head and running passes.

Every ``monitor_poll_interval_s`` it reads ``eth_blockNumber`` (one cheap call). When the head
moved, a block pass reads the pending invoices so that a payment is seen within one block;
then the due pass checks whatever is due (pending every 20 s, expired at the lower rate),
and every ``lifetime_poll_interval_s`` the lifetime pass reads the escrows whose low-rate
lifetime check is due (``monitor.lifetime``).
An RPC or database outage is logged and retried with exponential backoff; it never ends
the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.exc import SQLAlchemyError

from invoicing import logs, metrics
from invoicing.chain.gateway import ChainGateway
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import confirmed_at
from invoicing.monitor.lifetime import run_lifetime_pass
from invoicing.monitor.passes import run_block_pass, run_due_pass
from invoicing.services import Services

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0


async def run(services: Services, stop: asyncio.Event) -> None:
    """Monitor every configured chain until ``stop`` is set."""
    await asyncio.gather(*(watch_chain(services, chain, stop) for chain in services.chains.all()))


async def watch_chain(services: Services, chain: ChainGateway, stop: asyncio.Event) -> None:
    poll_s = services.settings.monitor_poll_interval_s
    lifetime_poll_ms = services.settings.lifetime_poll_interval_s * 1000
    chain_id = chain.config.chain_id
    logs.annotate(chain_id=chain_id)  # this loop runs in a task of its own
    last_block: int | None = None
    last_lifetime_ms: int | None = None
    failures = 0
    while not stop.is_set():
        try:
            block = confirmed_at(chain, await chain.block_number())
            if block != last_block:
                first_unread = block if last_block is None else last_block + 1
                with metrics.monitor_pass(chain_id, "block"):
                    await run_block_pass(services, chain, block, first_unread)
                last_block = block
            with metrics.monitor_pass(chain_id, "due"):
                result = await run_due_pass(services, chain, block)
            now_ms = services.clock.now_ms()
            if last_lifetime_ms is None or now_ms - last_lifetime_ms >= lifetime_poll_ms:
                with metrics.monitor_pass(chain_id, "lifetime"):
                    lifetime = await run_lifetime_pass(services, chain, block)
                # A backlog goes on at the next tick; otherwise wait for the next poll.
                last_lifetime_ms = None if lifetime.more else now_ms
            if result.unreadable:
                log.info(
                    "monitor pass on chain %s: %d escrow balances unreadable (token balanceOf "
                    "failed); those invoices are left as they were",
                    chain.config.chain_id,
                    result.unreadable,
                )
            failures = 0
            delay = poll_s
        except (ChainUnavailable, SQLAlchemyError, OSError) as exc:
            failures += 1
            delay = min(MAX_BACKOFF_S, poll_s * 2**failures)
            log.warning(
                "monitor pass on chain %s failed (%s); retrying in %.1f s",
                chain.config.chain_id,
                exc,
                delay,
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
