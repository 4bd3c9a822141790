"""The monitor's passes against a FakeChain and the real test database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.errors import ChainUnavailable
from invoicing.monitor import passes
from invoicing.monitor.check import read_balances, recheck_invoice
from invoicing.monitor.passes import claim_due, run_block_pass, run_due_pass
from invoicing.monitor.worker import watch_chain
from invoicing.services import Services
from tests.support.monitoring import (
    TOKEN,
    clock_of,
    events_of,
    fake_services,
    new_invoice,
    reload,
)

ETH = 10**18


@pytest.fixture
async def services(database_url: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(database_url, fake)
    yield built
    await built.db.dispose()


async def test_partial_payment_then_top_up_marks_paid_and_queues_one_event(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, amount="1.5")
    fake.pay(invoice.payment_address, ETH)
    clock_of(services).advance(1000)

    first = await run_due_pass(services, fake)

    partial = await reload(services, invoice)
    assert (first.checked, first.updated, first.paid) == (1, 1, 0)
    assert (partial.status, partial.paid, partial.balance_raw) == ("pending", False, str(ETH))
    assert partial.last_checked_at == services.clock.now_ms()
    assert await events_of(services, invoice) == []

    fake.pay(invoice.payment_address, ETH // 2)
    clock_of(services).advance(20_000)
    second = await run_due_pass(services, fake)

    paid = await reload(services, invoice)
    assert (second.checked, second.paid) == (1, 1)
    assert (paid.status, paid.paid, paid.paid_at) == ("paid", True, services.clock.now_ms())
    assert (paid.balance_raw, paid.watch) == (str(3 * ETH // 2), False)
    (event,) = await events_of(services, invoice)
    assert (event.status, event.attempts, event.url) == ("pending", 0, "https://hooks.example/paid")
    assert event.payload["balanceRaw"] == str(3 * ETH // 2)
    assert event.payload["balance"] == 1.5
    assert event.payload["status"] == "paid"


async def test_erc20_invoice_reads_token_balance(services: Services, fake: FakeChain) -> None:
    invoice = await new_invoice(services, fake, amount="2.5", token=TOKEN)
    fake.pay(invoice.payment_address, ETH)  # native coin does not count for a token invoice
    fake.pay(invoice.payment_address, 2_500_000, TOKEN)

    await run_due_pass(services, fake)

    paid = await reload(services, invoice)
    assert (paid.status, paid.balance_raw, paid.required_raw) == ("paid", "2500000", "2500000")


async def test_unchanged_invoice_only_moves_last_checked_at(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    clock_of(services).advance(5000)

    result = await run_due_pass(services, fake)

    row = await reload(services, invoice)
    assert (result.checked, result.updated) == (1, 0)
    assert row.last_checked_at == services.clock.now_ms()
    assert row.updated_at == invoice.updated_at
    assert row.next_check_at == services.clock.now_ms() + 20_000


async def test_claimed_invoices_are_not_due_again_until_the_interval(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    now_ms = services.clock.now_ms()

    first = await claim_due(services, fake.config.chain_id, now_ms, 100)
    again = await claim_due(services, fake.config.chain_id, now_ms + 19_999, 100)
    later = await claim_due(services, fake.config.chain_id, now_ms + 20_000, 100)

    assert [row.id for row in first] == [invoice.id]
    assert again == []
    assert [row.id for row in later] == [invoice.id]


async def test_expiry_then_late_payment_marks_paid_and_queues_the_event(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, expires_in_ms=10_000)
    clock_of(services).advance(10_000)

    await run_due_pass(services, fake)

    expired = await reload(services, invoice)
    assert (expired.status, expired.watch) == ("expired", True)
    assert expired.next_check_at == services.clock.now_ms() + 300_000

    fake.pay(invoice.payment_address, ETH)
    clock_of(services).advance(299_999)
    assert (await run_due_pass(services, fake)).checked == 0
    clock_of(services).advance(1)
    await run_due_pass(services, fake)

    late = await reload(services, invoice)
    assert (late.status, late.paid, late.paid_at) == ("paid", True, services.clock.now_ms())
    assert len(await events_of(services, invoice)) == 1


async def test_expired_invoice_stops_being_watched_after_the_late_window(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, expires_in_ms=1000)
    clock_of(services).advance(1000)
    await run_due_pass(services, fake)
    clock_of(services).advance(7 * 24 * 3600 * 1000 + 1)

    await run_due_pass(services, fake)

    row = await reload(services, invoice)
    assert (row.status, row.watch, row.last_checked_at) == (
        "expired",
        False,
        services.clock.now_ms(),
    )


async def test_block_pass_reads_pending_invoices_that_are_not_due(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    await run_due_pass(services, fake)  # now not due for 20 s
    fake.pay(invoice.payment_address, ETH)

    result = await run_block_pass(services, fake, fake.block)

    row = await reload(services, invoice)
    assert (result.checked, result.updated, result.paid) == (1, 1, 1)
    assert (row.status, row.paid) == ("paid", True)


async def test_a_second_reading_never_queues_a_second_event(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    fake.pay(invoice.payment_address, ETH)

    await run_block_pass(services, fake, fake.block)
    await recheck_invoice(services, await reload(services, invoice))
    await run_due_pass(services, fake)

    assert len(await events_of(services, invoice)) == 1


async def test_invoice_without_webhook_url_queues_nothing(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, webhook_url=None)
    fake.pay(invoice.payment_address, ETH)

    await run_due_pass(services, fake)

    assert (await reload(services, invoice)).status == "paid"
    assert await events_of(services, invoice) == []


async def test_read_balances_chunks_by_batch_size(services: Services, fake: FakeChain) -> None:
    invoices = [await new_invoice(services, fake) for _ in range(5)]
    for i, invoice in enumerate(invoices):
        fake.pay(invoice.payment_address, i)

    balances = await read_balances(fake, invoices, fake.block, batch_size=2)

    assert fake.balance_calls == 3
    assert balances == {invoice.id: i for i, invoice in enumerate(invoices)}


async def test_worker_survives_an_rpc_outage_and_catches_up(
    services: Services, fake: FakeChain, caplog: pytest.LogCaptureFixture
) -> None:
    invoice = await new_invoice(services, fake)
    fake.available = False
    stop = asyncio.Event()
    task = asyncio.create_task(watch_chain(services, fake, stop))
    with caplog.at_level(logging.WARNING, logger="invoicing.monitor.worker"):
        await asyncio.sleep(0.1)
        assert not task.done()
        fake.pay(invoice.payment_address, ETH)
        fake.available = True
        fake.block += 1
        for _ in range(200):
            if (await reload(services, invoice)).paid:
                break
            await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(task, 5)

    assert (await reload(services, invoice)).status == "paid"
    assert any("fake chain is down" in record.getMessage() for record in caplog.records)


async def test_a_failed_read_releases_the_claim_and_keeps_last_checked_at(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    clock_of(services).advance(3000)
    fake.available = False

    with pytest.raises(ChainUnavailable):
        await run_due_pass(services, fake, block=fake.block)

    row = await reload(services, invoice)
    assert row.last_checked_at == invoice.last_checked_at
    assert row.next_check_at == services.clock.now_ms()
    fake.available = True
    assert (await run_due_pass(services, fake)).checked == 1
    assert (await reload(services, invoice)).last_checked_at == services.clock.now_ms()


async def test_a_pass_claims_in_pages_without_duplicates(
    services: Services, fake: FakeChain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(passes, "CLAIM_PAGE", 3)
    invoices = [await new_invoice(services, fake) for _ in range(10)]
    fake.pay(invoices[4].payment_address, ETH)
    clock_of(services).advance(1000)

    result = await run_due_pass(services, fake)

    assert (result.checked, result.updated, result.paid) == (10, 1, 1)
    for invoice in invoices:
        row = await reload(services, invoice)
        assert row.last_checked_at == services.clock.now_ms()
    assert len(await events_of(services, invoices[4])) == 1
    assert await claim_due(services, fake.config.chain_id, services.clock.now_ms(), 100) == []


async def test_the_due_pass_takes_the_block_pass_readings_at_the_same_block(
    services: Services, fake: FakeChain
) -> None:
    paid = await new_invoice(services, fake)
    unpaid = await new_invoice(services, fake)
    fake.pay(paid.payment_address, ETH)
    block = await run_block_pass(services, fake, fake.block)
    calls_after_block_pass = fake.balance_calls
    fake.pay(unpaid.payment_address, ETH)  # after the block pass read it: not seen at once
    clock_of(services).advance(1000)

    due = await run_due_pass(services, fake, fake.block, block)

    assert block.readings == {paid.id: ETH, unpaid.id: 0}
    assert fake.balance_calls == calls_after_block_pass  # nothing read again
    assert (due.checked, due.updated, due.paid) == (1, 0, 0)  # the paid one left the watch
    row = await reload(services, unpaid)
    assert (row.status, row.last_checked_at) == ("pending", services.clock.now_ms())
    fake.block += 1
    clock_of(services).advance(20_000)
    later = await run_due_pass(services, fake, fake.block, block)  # of an older block
    assert (later.checked, later.paid) == (1, 1)
    assert fake.balance_calls == calls_after_block_pass + 1


async def test_two_monitors_on_one_database_mark_each_payment_once(
    services: Services, database_url: str, fake: FakeChain
) -> None:
    other = fake_services(database_url, fake)  # a second worker: its own engine and clock
    invoices = [await new_invoice(services, fake) for _ in range(6)]
    stop = asyncio.Event()
    loops = [asyncio.create_task(watch_chain(s, fake, stop)) for s in (services, other)]
    for invoice in invoices:
        fake.pay(invoice.payment_address, ETH)
        fake.block += 1
        await asyncio.sleep(0.03)
    for _ in range(300):
        if all([(await reload(services, invoice)).paid for invoice in invoices]):
            break
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*loops), 5)
    await other.db.dispose()

    for invoice in invoices:
        row = await reload(services, invoice)
        assert (row.status, row.balance_raw, row.watch) == ("paid", str(ETH), False)
        (event,) = await events_of(services, invoice)
        assert event.payload["status"] == "paid"
