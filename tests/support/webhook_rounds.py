"""What the webhook tests that drive delivery by hand share: the services on a fresh database
and the in-memory chain (private receivers allowed), the worker's real HTTP client, and one
claim-send-record round as the worker does it.

The fixtures are imported by the test modules that use them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.notifications.claims import claim_events
from invoicing.notifications.client import WebhookClient
from invoicing.notifications.delivery import AttemptResult, record_results
from invoicing.notifications.worker import client_for
from invoicing.services import Services
from tests.support.monitoring import fake_services


@pytest.fixture
async def services(own_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(own_database, fake, webhook_allow_private=True)
    yield built
    await built.db.dispose()


@pytest.fixture
async def client(services: Services) -> AsyncIterator[WebhookClient]:
    real = client_for(services)
    yield real
    await real.aclose()


async def deliver(services: Services, client: WebhookClient, limit: int = 1000) -> list[str]:
    """One claim-send-record round over real HTTP, as the worker does it; the claimed ids."""
    claimed = await claim_events(services, services.clock.now_ms(), limit)
    results = [
        AttemptResult.of(c, services.clock.now_ms(), await client.send(c.delivery)) for c in claimed
    ]
    await record_results(services, results)
    return [c.event_id for c in claimed]
