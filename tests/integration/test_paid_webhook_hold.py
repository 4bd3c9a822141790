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
from invoicing.monitor import records
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


async def paid(services: Services, fake: FakeChain, count: int = 1) -> list[Invoice]:
    """``count`` invoices, each paid by one transfer in one block, marked paid by a pass."""
    invoices = [await new_invoice(services, fake, amount="1") for _ in range(count)]
    fake.block += 1
    for invoice in invoices:
        fake.record_transfer(invoice.payment_address, PAYER, ETH)
    result = await run_block_pass(services, fake, fake.block)
    assert result.paid == count
    return invoices


async def test_the_paid_webhook_waits_for_the_records_and_carries_them(
    services: Services, fake: FakeChain
) -> None:
    (invoice,) = await paid(services, fake)
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


async def test_a_burst_of_more_payments_than_a_batch_is_released_in_one_run(
    services: Services, fake: FakeChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "SCAN_BATCH", 2)
    invoices = await paid(services, fake, count=5)
    client = FakeWebhookClient()

    result = await run_records_step(services, fake, fake.block)
    bodies = await deliver_due(services, client)

    assert (result.scanned, result.recorded) == (5, 5)
    assert sorted(body["paymentAddress"] for body in bodies) == sorted(
        invoice.payment_address for invoice in invoices
    )
    assert [len(body["payments"]) for body in bodies] == [1] * 5


async def test_a_run_records_only_the_invoices_of_the_shards_it_holds(
    services: Services, fake: FakeChain
) -> None:
    invoices = await paid(services, fake, count=4)  # in one shard of 64 all four: 1 in 262,144
    held = invoices[0].shard
    others = tuple(sorted({invoice.shard for invoice in invoices} - {held}))
    client = FakeWebhookClient()

    mine = await run_records_step(services, fake, fake.block, shards=(held,))
    first = await deliver_due(services, client)
    rest = await run_records_step(services, fake, fake.block, shards=others)
    second = await deliver_due(services, client)

    in_held = sorted(i.payment_address for i in invoices if i.shard == held)
    assert (mine.recorded, rest.recorded) == (len(in_held), 4 - len(in_held))
    assert sorted(body["paymentAddress"] for body in first) == in_held
    assert sorted(body["paymentAddress"] for body in second) == sorted(
        i.payment_address for i in invoices if i.shard != held
    )
