"""Shards of a chain's watched invoices: leases split between workers, handed over, taken
over after a killed worker's lease; passes record when they read a shard, and that record is
every watched invoice's lastCheckedAt (FakeChain, real database)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass, run_due_pass
from invoicing.monitor.shards import ShardLeases
from invoicing.monitor.worker import watch_chain
from invoicing.services import Services
from invoicing.tables.monitor import SHARDS, shard_of
from invoicing.web.api.invoices import owner_views
from tests.support.monitoring import (
    clock_of,
    fake_services,
    new_invoice,
    reload,
    row_values,
    shown_last_checked,
)

ETH = 10**18


@pytest.fixture
async def services(database_url: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(database_url, fake, monitor_lease_s=10)
    yield built
    await built.db.dispose()


async def test_two_workers_split_the_shards_and_a_third_gets_its_share(
    services: Services, fake: FakeChain
) -> None:
    chain_id = fake.config.chain_id
    first, second, third = (ShardLeases(services, chain_id) for _ in range(3))

    assert len(await first.renew()) == SHARDS  # alone: every shard
    assert await second.renew() == ()  # its share is held until the first hands it over
    assert len(await first.renew()) == SHARDS // 2
    assert len(await second.renew()) == SHARDS // 2
    await third.renew()
    await first.renew()
    await second.renew()
    held = [await worker.renew() for worker in (first, second, third)]

    assert sorted(len(shards) for shards in held) == [20, 22, 22]  # at most ceil(64 / 3)
    assert sorted(shard for shards in held for shard in shards) == list(range(SHARDS))


async def test_a_killed_workers_shards_are_taken_over_after_one_lease(
    services: Services, fake: FakeChain
) -> None:
    chain_id = fake.config.chain_id
    killed, survivor = ShardLeases(services, chain_id), ShardLeases(services, chain_id)
    await killed.renew()
    await survivor.renew()
    await killed.renew()
    assert len(await survivor.renew()) == SHARDS // 2

    clock_of(services).advance(9_999)  # the killed one renews no more
    assert len(await survivor.renew()) == SHARDS // 2
    assert killed.held() != ()
    clock_of(services).advance(2)

    assert len(await survivor.renew()) == SHARDS
    assert killed.held() == ()  # it would not read on after its lease either


async def test_a_worker_that_stops_hands_its_shards_over_at_once(
    services: Services, fake: FakeChain
) -> None:
    chain_id = fake.config.chain_id
    leaving, staying = ShardLeases(services, chain_id), ShardLeases(services, chain_id)
    await leaving.renew()
    await staying.renew()

    await leaving.release()

    assert len(await staying.renew()) == SHARDS


async def test_a_pass_over_some_shards_reads_only_their_invoices(
    services: Services, fake: FakeChain
) -> None:
    invoices = [await new_invoice(services, fake) for _ in range(12)]
    shards = sorted({shard_of(invoices[0].id), shard_of(invoices[1].id)})
    mine = [i for i in invoices if shard_of(i.id) in shards]
    for invoice in invoices:
        fake.pay(invoice.payment_address, ETH)

    result = await run_block_pass(services, fake, fake.block, shards=shards)

    assert (result.checked, result.paid) == (len(mine), len(mine))
    for invoice in invoices:
        assert (await reload(services, invoice)).paid == (invoice in mine)


async def test_a_pending_invoice_is_checked_every_20_seconds_while_the_head_stands_still(
    database_url: str, fake: FakeChain
) -> None:
    # The service's clock runs 50 times faster than the lease renewals' real time here.
    services = fake_services(database_url, fake, monitor_lease_s=3600)
    invoice = await new_invoice(services, fake)
    stored = await row_values(services, invoice)
    created_ms = services.clock.now_ms()
    stop = asyncio.Event()
    worker = asyncio.create_task(watch_chain(services, fake, stop))
    ages = []
    for _ in range(30):  # 75 s of the service's time in steps of 2.5 s, one block
        clock_of(services).advance(2_500)
        for _ in range(100):  # the worker gets up to 5 s of real time for each step
            age = services.clock.now_ms() - await shown_last_checked(services, invoice)
            if age <= 20_000:
                break
            await asyncio.sleep(0.05)
        ages.append(age)
    stop.set()
    await asyncio.wait_for(worker, 5)

    assert max(ages) <= 20_000
    # The passes went on to the end: the last one within 20 s of it (a pass due exactly then
    # may not have run yet, as the loop above accepts an age of 20 s).
    assert await shown_last_checked(services, invoice) >= created_ms + 75_000 - 20_000
    assert await row_values(services, invoice) == stored  # and its row was never written
    await services.db.dispose()


async def test_every_representation_shows_the_passes_last_check(
    services: Services, fake: FakeChain
) -> None:
    pending = await new_invoice(services, fake)
    expiring = await new_invoice(services, fake, expires_in_ms=1000)
    clock_of(services).advance(5_000)
    await run_due_pass(services, fake)  # expires one, reads the other
    expired_ms = services.clock.now_ms()
    clock_of(services).advance(30_000)
    await run_due_pass(services, fake)  # the pending one is due again, the expired one not
    pending_ms = services.clock.now_ms()
    rows = [await reload(services, pending), await reload(services, expiring)]

    api = await owner_views(services, rows)
    events = [await shown_last_checked(services, row) for row in rows]

    assert [view["lastCheckedAt"] for view in api] == [pending_ms, expired_ms]
    assert events == [pending_ms, expired_ms]
    assert rows[0].last_checked_at == pending.last_checked_at  # from the record, not the row
