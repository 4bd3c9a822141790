"""A worker's watched set (``monitor.watched``, ``monitor.changes``): loaded once per shard,
then only what changed, on the real test database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import update

from invoicing.chain.fake import FakeChain
from invoicing.invoices.service import delete_invoice
from invoicing.monitor.changes import watched_of
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.passes import ALL_SHARDS, run_block_pass
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from tests.support.monitoring import (
    TOKEN,
    clock_of,
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


@pytest.fixture
async def other(database_url: str, fake: FakeChain) -> AsyncIterator[Services]:
    """Another process on the same database: its own engine, clock and watched set."""
    built = fake_services(database_url, fake)
    yield built
    await built.db.dispose()


def held(services: Services, fake: FakeChain) -> dict[str, int]:
    """The escrows the worker holds (lower-case address: the expiry held for it)."""
    watched = watched_of(services.db, fake.config.chain_id)
    return {
        address: expiry
        for shard in watched.shards.values()
        for _token, accounts, expires in shard.pieces()
        for address, expiry in zip(accounts, expires, strict=True)
    }


async def test_a_new_invoice_is_read_by_the_next_pass_without_a_reload(
    services: Services, fake: FakeChain
) -> None:
    first = await new_invoice(services, fake)
    await run_block_pass(services, fake, fake.block)
    assert watched_of(services.db, fake.config.chain_id).loads == len(ALL_SHARDS)

    later = await new_invoice(services, fake, token=TOKEN)
    fake.pay(later.payment_address, 1_000_000, TOKEN)
    result = await run_block_pass(services, fake, fake.block)

    assert (result.checked, result.paid) == (2, 1)
    assert (await reload(services, later)).status == "paid"
    # What a pass wrote is read back at the start of the next one.
    assert (await run_block_pass(services, fake, fake.block)).checked == 1
    assert held(services, fake) == {first.payment_address.lower(): first.expires_at}
    assert watched_of(services.db, fake.config.chain_id).loads == len(ALL_SHARDS)


async def test_a_deleted_invoice_leaves_the_watched_set(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake)
    await run_block_pass(services, fake, fake.block)
    assert held(services, fake) == {invoice.payment_address.lower(): invoice.expires_at}

    await delete_invoice(
        services.db,
        invoice.owner_key,
        fake.config.chain_id,
        invoice.invoice_id,
        services.clock.now_ms(),
        services.settings,
    )
    fake.pay(invoice.payment_address, ETH)
    result = await run_block_pass(services, fake, fake.block)

    assert (result.checked, result.paid) == (0, 0)
    assert held(services, fake) == {}
    assert (await reload(services, invoice)).status == "cancelled"


async def test_an_expired_invoice_leaves_the_watched_set(
    services: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(services, fake, expires_in_ms=10_000)
    await run_block_pass(services, fake, fake.block)
    clock_of(services).advance(10_000)

    expiring = await run_block_pass(services, fake, fake.block)
    after = await run_block_pass(services, fake, fake.block)

    assert (expiring.checked, expiring.updated, after.checked) == (1, 1, 0)
    assert (await reload(services, invoice)).status == "expired"
    assert held(services, fake) == {}


async def test_a_paid_invoice_leaves_the_watched_set_and_a_partial_one_is_decided_on_its_row(
    services: Services, fake: FakeChain
) -> None:
    paid, partial = [await new_invoice(services, fake, amount="2") for _ in range(2)]
    await run_block_pass(services, fake, fake.block)
    fake.pay(paid.payment_address, 2 * ETH)
    fake.pay(partial.payment_address, ETH)

    first = await run_block_pass(services, fake, fake.block)
    then = await run_block_pass(services, fake, fake.block)

    assert (first.checked, first.updated, first.paid) == (2, 2, 1)
    assert (await reload(services, paid)).status == "paid"
    # Funds arrived: its reading is decided on its row (LOUD) from now on.
    assert held(services, fake) == {partial.payment_address.lower(): -1}
    assert (then.checked, then.updated) == (1, 0)


async def test_changes_made_by_another_process_reach_the_watched_set(
    services: Services, other: Services, fake: FakeChain
) -> None:
    seen_paid = await new_invoice(services, fake)
    await run_block_pass(services, fake, fake.block)

    # The other process: a new invoice, and a payment its status lookup found.
    created = await new_invoice(other, fake)
    fake.pay(seen_paid.payment_address, ETH)
    await recheck_invoice(other, await reload(other, seen_paid))
    result = await run_block_pass(services, fake, fake.block)

    assert (await reload(services, seen_paid)).status == "paid"
    assert (result.checked, result.paid) == (1, 0)  # paid elsewhere: not read here again
    assert held(services, fake) == {created.payment_address.lower(): created.expires_at}
    assert watched_of(services.db, fake.config.chain_id).loads == len(ALL_SHARDS)


async def test_a_change_committed_after_a_later_one_is_not_missed(
    services: Services, other: Services, fake: FakeChain
) -> None:
    """PostgreSQL hands out change numbers when a transaction writes, not when it commits:
    a change that commits after a later-numbered one has been read is still read."""
    if services.db.dialect != "postgresql":
        pytest.skip("SQLite's writers take turns: changes commit in their order")
    slow = await new_invoice(services, fake)
    await run_block_pass(services, fake, fake.block)
    async with other.db.transaction() as session:
        await session.execute(
            update(Invoice).where(Invoice.id == slow.id).values(status="cancelled", watch=False)
        )
        quick = await new_invoice(services, fake)  # numbered after, committed first
        await run_block_pass(services, fake, fake.block)
        assert set(held(services, fake)) == {
            slow.payment_address.lower(),
            quick.payment_address.lower(),
        }

    await run_block_pass(services, fake, fake.block)

    assert set(held(services, fake)) == {quick.payment_address.lower()}


async def test_a_shard_taken_on_is_loaded_once_and_a_shard_handed_back_is_forgotten(
    services: Services, fake: FakeChain
) -> None:
    invoices = [await new_invoice(services, fake) for _ in range(8)]
    low, high = ALL_SHARDS[:32], ALL_SHARDS[32:]
    watched = watched_of(services.db, fake.config.chain_id)

    await run_block_pass(services, fake, fake.block, shards=low)
    await run_block_pass(services, fake, fake.block, shards=ALL_SHARDS)
    await run_block_pass(services, fake, fake.block, shards=ALL_SHARDS)
    assert watched.loads == 64
    assert set(held(services, fake)) == {i.payment_address.lower() for i in invoices}

    await run_block_pass(services, fake, fake.block, shards=high)
    assert set(watched.shards) == set(high)
    await run_block_pass(services, fake, fake.block, shards=ALL_SHARDS)

    assert watched.loads == 96
    assert set(held(services, fake)) == {i.payment_address.lower() for i in invoices}
