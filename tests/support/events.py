"""Running the webhook worker by hand, until nothing is due."""

from __future__ import annotations

from invoicing.monitor.records import run_records_step
from invoicing.notifications.worker import Dispatcher, client_for
from invoicing.services import Services


async def deliver_due(services: Services) -> None:
    """Run the webhook worker until nothing is due (at the services' clock)."""
    client = client_for(services)
    dispatcher = Dispatcher(services, client)
    try:
        while await dispatcher.claim():
            await dispatcher.drain()
    finally:
        await client.aclose()


async def record_then_deliver_due(services: Services) -> None:
    """As the monitor then the webhook worker would: record the payments of every chain's
    queued scans (which releases the paid webhooks waiting for them), then deliver."""
    for chain in services.chains.all():
        await run_records_step(services, chain, await chain.block_number())
    await deliver_due(services)
