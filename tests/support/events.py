"""Running the webhook worker by hand, until nothing is due."""

from __future__ import annotations

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
