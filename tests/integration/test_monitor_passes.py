"""The monitor's passes against a FakeChain and the real test database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.chain.reader import CALL_GAS, account_gas
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import read_balances, recheck_invoice
from invoicing.monitor.passes import run_block_pass, run_due_pass
from invoicing.monitor.worker import watch_chain
from invoicing.services import Services
from tests.support.monitoring import (
    TOKEN,
    clock_of,
    events_of,
    fake_services,
    new_invoice,
    reload,
    row_values,
    shown_last_checked,
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


async def test_the_due_pass_writes_nothing_for_an_unchanged_invoice(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    before = await row_values(services, invoice)
    clock_of(services).advance(5000)

    result = await run_due_pass(services, fake)

    assert (result.checked, result.updated) == (1, 0)
    assert await row_values(services, invoice) == before  # not one column written
    assert await shown_last_checked(services, invoice) == services.clock.now_ms()


async def test_shards_are_not_due_again_until_the_interval(
    services: Services, fake: FakeChain
) -> None:
    await new_invoice(services, fake)
    first = await run_due_pass(services, fake)
    calls = fake.balance_calls

    clock_of(services).advance(19_999)
    again = await run_due_pass(services, fake)
    clock_of(services).advance(1)
    later = await run_due_pass(services, fake)

    assert (first.checked, again.checked, later.checked) == (1, 0, 1)
    assert again.block == 0 and fake.balance_calls == calls + 1  # no read while not due


async def test_expiry_then_late_payment_marks_paid_and_queues_the_event(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, expires_in_ms=10_000)
    clock_of(services).advance(10_000)

    await run_due_pass(services, fake)

    expired = await reload(services, invoice)
    assert (expired.status, expired.watch) == ("expired", True)

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


async def test_a_failed_read_records_no_pass_and_the_shards_stay_due(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    clock_of(services).advance(3000)
    fake.available = False

    with pytest.raises(ChainUnavailable):
        await run_due_pass(services, fake, block=fake.block)

    assert await shown_last_checked(services, invoice) == invoice.last_checked_at
    fake.available = True
    assert (await run_due_pass(services, fake)).checked == 1
    assert await shown_last_checked(services, invoice) == services.clock.now_ms()


async def test_a_pass_reads_in_batches_across_shards_and_stores_each_payment_once(
    database_url: str, fake: FakeChain
) -> None:
    # Room for three native escrows per read, or one token escrow and one native one.
    read_gas = CALL_GAS + 3 * account_gas(None)
    services = fake_services(database_url, fake, monitor_read_gas=read_gas)
    invoices = [await new_invoice(services, fake) for _ in range(10)]
    fake.pay(invoices[4].payment_address, ETH)
    clock_of(services).advance(1000)

    result = await run_due_pass(services, fake)

    assert (result.checked, result.updated, result.paid) == (10, 1, 1)
    assert fake.balance_calls == 4  # ceil(10 / 3): batches are filled across shards
    for invoice in invoices[:4] + invoices[5:]:
        assert await shown_last_checked(services, invoice) == services.clock.now_ms()
    assert len(await events_of(services, invoices[4])) == 1
    await services.db.dispose()


async def test_one_batch_decides_only_the_readings_that_can_change_an_invoice(
    database_url: str, fake: FakeChain
) -> None:
    # One read of four escrows: an untouched one read empty, a partly paid one (decided on
    # its row, unchanged), one read empty at its expiry, and one just paid.
    services = fake_services(database_url, fake)
    untouched = await new_invoice(services, fake)
    partial = await new_invoice(services, fake, amount="2")
    expiring = await new_invoice(services, fake, expires_in_ms=30_000)
    paying = await new_invoice(services, fake)
    fake.pay(partial.payment_address, ETH)
    clock_of(services).advance(1000)
    assert (await run_block_pass(services, fake, 1)).updated == 1
    before = [await row_values(services, i) for i in (untouched, partial)]
    fake.pay(paying.payment_address, ETH)
    clock_of(services).advance(29_000)
    calls = fake.balance_calls

    result = await run_block_pass(services, fake, 2)

    assert (result.checked, result.updated, result.paid) == (4, 2, 1)
    assert fake.balance_calls == calls + 1
    assert [await row_values(services, i) for i in (untouched, partial)] == before
    assert (await reload(services, expiring)).status == "expired"
    assert (await reload(services, paying)).status == "paid"
    await services.db.dispose()


async def test_a_read_holds_every_asset_and_is_cut_by_its_estimated_gas(
    database_url: str, fake: FakeChain
) -> None:
    read_gas = CALL_GAS + account_gas(TOKEN) + account_gas(None)
    services = fake_services(database_url, fake, monitor_read_gas=read_gas)
    native = await new_invoice(services, fake)
    tokens = [await new_invoice(services, fake, amount="2.5", token=TOKEN) for _ in range(2)]
    fake.pay(native.payment_address, ETH)
    fake.pay(tokens[1].payment_address, 2_500_000, TOKEN)
    clock_of(services).advance(1000)

    result = await run_due_pass(services, fake)

    # Whatever the rows' order, one read holds the native escrow and a token one, and the
    # other token escrow (two token escrows are over the gas) goes in a second read.
    assert (result.checked, result.paid) == (3, 2)
    assert fake.balance_calls == 2
    statuses = [(await reload(services, i)).status for i in [native, *tokens]]
    assert statuses == ["paid", "pending", "paid"]
    await services.db.dispose()


async def test_after_a_block_pass_the_due_pass_reads_nothing_until_the_interval(
    services: Services, fake: FakeChain
) -> None:
    paid = await new_invoice(services, fake)
    unpaid = await new_invoice(services, fake)
    fake.pay(paid.payment_address, ETH)
    block = await run_block_pass(services, fake, fake.block)
    calls_after_block_pass = fake.balance_calls
    fake.pay(unpaid.payment_address, ETH)  # after the block pass read it: not seen at once
    clock_of(services).advance(1000)

    due = await run_due_pass(services, fake, fake.block)

    assert (block.checked, block.paid) == (2, 1)
    assert fake.balance_calls == calls_after_block_pass  # nothing read again
    assert due.checked == 0
    assert await shown_last_checked(services, unpaid) == services.clock.now_ms() - 1000
    fake.block += 1
    clock_of(services).advance(19_000)
    later = await run_due_pass(services, fake, fake.block)
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


async def test_a_pass_resumed_after_a_pause_never_moves_a_balance_back(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, amount="3")
    fake.block = 10
    fake.pay(invoice.payment_address, ETH)
    fake.block = 11  # block 10's books kept: 1 ETH
    fake.pay(invoice.payment_address, ETH)
    fake.block = 20
    await run_block_pass(services, fake, 20)
    stored = await row_values(services, invoice)

    # A worker that read block 10 and paused writes after the pass of block 20.
    resumed = await run_block_pass(services, fake, 10)

    kept = await reload(services, invoice)
    assert (resumed.checked, resumed.updated, resumed.paid) == (1, 1, 0)
    assert (kept.balance_raw, kept.balance_block, kept.status) == (str(2 * ETH), 20, "pending")
    assert await row_values(services, invoice) == stored  # not one column written
    assert await events_of(services, invoice) == []

    # A later block's reading is stored as ever.
    fake.pay(invoice.payment_address, ETH)
    fake.block = 30
    later = await run_block_pass(services, fake, 30)

    paid = await reload(services, invoice)
    assert later.paid == 1
    assert (paid.balance_raw, paid.balance_block, paid.status) == (str(3 * ETH), 30, "paid")
