"""Unreadable balances (a token whose balanceOf fails) in monitor passes and live re-checks:
unknown for those invoices alone, while every other invoice of the pass is handled as usual
(FakeChain, real database)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.passes import run_block_pass, run_due_pass
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
from tests.support.rows import insert_invoice
from tests.support.signing import new_owner

ETH = 10**18
HOSTILE = "0x" + "6b" * 20


@pytest.fixture
async def services(database_url: str, fake: FakeChain) -> AsyncIterator[Services]:
    fake.add_token(HOSTILE, 6, "HOSTILE")
    fake.unreadable_tokens.add(HOSTILE.lower())
    built = fake_services(database_url, fake)
    yield built
    await built.db.dispose()


async def test_due_pass_marks_the_paid_invoice_and_leaves_unreadable_ones_alone(
    services: Services, fake: FakeChain
) -> None:
    attacker = new_owner().address
    hostile = [await insert_invoice(services, fake, attacker, HOSTILE, 10) for _ in range(6)]
    paid = await new_invoice(services, fake, amount="1")
    tokens = await new_invoice(services, fake, amount="2", token=TOKEN)
    fake.pay(paid.payment_address, ETH)
    fake.pay(tokens.payment_address, 500_000, TOKEN)
    clock_of(services).advance(1_000)

    result = await run_due_pass(services, fake)

    assert (result.checked, result.updated, result.paid, result.unreadable) == (2, 2, 1, 6)
    stored = await reload(services, paid)
    assert (stored.status, stored.paid, stored.balance_raw) == ("paid", True, str(ETH))
    assert len(await events_of(services, paid)) == 1
    assert (await reload(services, tokens)).balance_raw == "500000"
    for invoice in hostile:
        row = await reload(services, invoice)
        assert (row.status, row.balance_raw, row.updated_at) == ("pending", "0", invoice.updated_at)
        assert row.last_checked_at == invoice.last_checked_at  # not checked: left as it was
        assert await shown_last_checked(services, invoice) == invoice.last_checked_at
        assert row.unreadable
        assert await events_of(services, invoice) == []
    assert await shown_last_checked(services, tokens) == services.clock.now_ms()


async def test_an_unreadable_invoice_is_written_once_then_again_when_readable(
    services: Services, fake: FakeChain
) -> None:
    fake.unreadable_tokens.clear()  # a token that works, then fails, then works again
    invoice = await insert_invoice(services, fake, new_owner().address, HOSTILE, 10)
    clock_of(services).advance(30_000)
    await run_due_pass(services, fake)  # a covering pass: it was readable until now
    fake.block += 1
    clock_of(services).advance(30_000)
    await run_block_pass(services, fake, fake.block)  # readable: lastCheckedAt moves
    shown = services.clock.now_ms()
    fake.unreadable_tokens.add(HOSTILE.lower())

    clock_of(services).advance(30_000)
    first = await run_due_pass(services, fake)
    flagged = await row_values(services, invoice)
    clock_of(services).advance(30_000)
    second = await run_due_pass(services, fake)

    assert (first.unreadable, second.unreadable) == (1, 1)
    assert await row_values(services, invoice) == flagged  # the second pass wrote nothing
    row = await reload(services, invoice)
    assert (row.unreadable, row.last_checked_at) == (True, shown)
    assert await shown_last_checked(services, invoice) == shown

    fake.unreadable_tokens.clear()
    clock_of(services).advance(30_000)
    third = await run_due_pass(services, fake)

    assert (third.checked, third.updated, third.unreadable) == (1, 1, 0)
    row = await reload(services, invoice)
    assert (row.unreadable, row.last_checked_at) == (False, services.clock.now_ms())
    assert (row.status, row.updated_at) == ("pending", invoice.updated_at)


async def test_an_unreadable_invoice_past_its_expiry_does_not_expire(
    services: Services, fake: FakeChain
) -> None:
    invoice = await insert_invoice(
        services, fake, new_owner().address, HOSTILE, 10, expires_in_ms=1
    )
    clock_of(services).advance(5_000)

    result = await run_due_pass(services, fake)

    assert result.unreadable == 1
    assert (await reload(services, invoice)).status == "pending"


async def test_block_pass_goes_on_past_unreadable_invoices(
    services: Services, fake: FakeChain
) -> None:
    hostile = await insert_invoice(services, fake, new_owner().address, HOSTILE, 10)
    paid = await new_invoice(services, fake, amount="1")
    fake.pay(paid.payment_address, ETH)

    result = await run_block_pass(services, fake, fake.block)

    assert (result.paid, result.unreadable) == (1, 1)
    assert (await reload(services, paid)).status == "paid"
    assert (await reload(services, hostile)).updated_at == hostile.updated_at


async def test_recheck_of_an_unreadable_invoice_answers_it_unchanged(
    services: Services, fake: FakeChain
) -> None:
    hostile = await insert_invoice(services, fake, new_owner().address, HOSTILE, 10)
    paid = await new_invoice(services, fake, amount="1")
    fake.pay(paid.payment_address, ETH)
    clock_of(services).advance(5_000)

    hostile_answer, paid_answer = await asyncio.gather(
        recheck_invoice(services, hostile), recheck_invoice(services, paid)
    )

    assert (hostile_answer.status, hostile_answer.balance_raw) == ("pending", "0")
    assert hostile_answer.last_checked_at == hostile.last_checked_at
    assert (paid_answer.status, paid_answer.balance_raw) == ("paid", str(ETH))
    assert len(await events_of(services, paid)) == 1
    stored = await reload(services, hostile)
    assert (stored.updated_at, stored.last_checked_at) == (
        hostile.updated_at,
        hostile.last_checked_at,
    )
