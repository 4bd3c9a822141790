"""The paid webhook waits for the invoice's payments of record: held when the invoice is
marked paid, sent with the payments once the monitor's records step has read them, and sent
without them when the chain keeps those reads from succeeding for the whole hold (a fake
chain, the in-memory webhook client and the real database)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.errors import ChainUnavailable
from invoicing.invoices.payments import PAID_WEBHOOK_HOLD_MS
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications.claims import claim_events
from invoicing.notifications.client import FakeWebhookClient
from invoicing.notifications.delivery import AttemptResult, record_results
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from tests.support.monitoring import clock_of, fake_services, new_invoice

ETH = 10**18
PAYER = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"


@pytest.fixture
async def services(own_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(own_database, fake)
    yield built
    await built.db.dispose()


async def deliver_due(services: Services, client: FakeWebhookClient) -> list[dict[str, Any]]:
    """One claim-send-record round, as the worker does it; the bodies sent."""
    mine = await claim_events(services, services.clock.now_ms(), 1000)
    results = [
        AttemptResult.of(c, services.clock.now_ms(), await client.send(c.delivery)) for c in mine
    ]
    await record_results(services, results)
    return [json.loads(c.delivery.body) for c in mine]


async def paid(services: Services, fake: FakeChain) -> Invoice:
    """An invoice paid by one transfer, marked paid by a block pass."""
    invoice = await new_invoice(services, fake, amount="1")
    fake.block += 1
    fake.record_transfer(invoice.payment_address, PAYER, ETH)
    result = await run_block_pass(services, fake, fake.block)
    assert result.paid == 1
    return invoice


async def test_the_paid_webhook_waits_for_the_records_and_carries_them(
    services: Services, fake: FakeChain
) -> None:
    invoice = await paid(services, fake)
    client = FakeWebhookClient()

    assert await deliver_due(services, client) == []  # held: nothing recorded yet
    await run_records_step(services, fake, fake.block)
    (body,) = await deliver_due(services, client)

    (transfer,) = [t for _, t in fake.transfers]
    assert body["paymentAddress"] == invoice.payment_address
    assert body["payments"] == [
        {
            "txHash": transfer.tx_hash,
            "from": PAYER,
            "amountRaw": str(ETH),
            "tokenAddress": None,
            "blockNumber": fake.block,
        }
    ]


async def test_without_the_records_the_paid_webhook_goes_at_the_end_of_the_hold(
    services: Services, fake: FakeChain
) -> None:
    await paid(services, fake)
    client = FakeWebhookClient()
    fake.errors["native_transfers"] = ChainUnavailable("the node keeps failing")

    with pytest.raises(ChainUnavailable):
        await run_records_step(services, fake, fake.block)
    clock_of(services).advance(PAID_WEBHOOK_HOLD_MS - 1)
    assert await deliver_due(services, client) == []
    clock_of(services).advance(1)
    (body,) = await deliver_due(services, client)

    assert (body["status"], body["balanceRaw"]) == ("paid", str(ETH))
    assert "payments" not in body
