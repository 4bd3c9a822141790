"""The relayer's daily budget and the owners it sets aside, on FakeChain and a real database:
sweeps wait when the chain's or the owner's share of the day is used; a sweep mined reverted
parks its escrows with backoff and sets its owner aside, whose sweeps and signed requests
then wait while others go on."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import select

from invoicing import housekeeping
from invoicing.settlement.backoff import Backoff
from invoicing.settlement.budget import DAY_MS, BudgetExhausted, SetAside, Spender
from invoicing.settlement.meta import MetaCall, relay_meta
from invoicing.settlement.parking import parked_escrows
from invoicing.settlement.relayer import Call
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import (
    OwnerSetAside,
    ParkedEscrow,
    RelayerSpend,
    RelayerTransaction,
    TxPurpose,
    TxStatus,
)
from tests.support.monitoring import reload
from tests.support.settlement import SettlementWorld, sent_withdraws, worlds
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

# FakeChain estimates 50,000 gas; a transaction is sent with 50,000 * 5/4 + 20,000.
SWEEP_GAS = 82_500


@dataclass
class World(SettlementWorld):
    async def plan(self) -> list[RelayerTransaction]:
        return await plan_withdrawals(self.services, self.fake, self.relayer, full=True)

    async def revert_all(self) -> list[RelayerTransaction]:
        """Mine every sent withdraw reverted (nothing moves), then follow it to the end."""
        self.fake.block += 1
        for sent in sent_withdraws(self.fake):
            if sent.tx_hash in self.fake.receipts:
                continue
            self.fake.receipts[sent.tx_hash] = {
                "status": 0,
                "blockNumber": self.fake.block,
                "transactionHash": sent.tx_hash,
                "gasUsed": SWEEP_GAS,
                "logs": [],
            }
            key = sent.sender.lower()
            self.fake.mined_counts[key] = self.fake.mined_counts.get(key, 0) + 1
        return await track_pending(self.services, self.fake, self.relayer)

    async def spend(self) -> dict[str, tuple[int, int]]:
        """Today's spend rows of this chain: share -> (transactions, gas)."""
        now_ms = self.clock.now_ms()
        async with self.services.db.sessions() as session:
            rows = await session.scalars(
                select(RelayerSpend).where(
                    RelayerSpend.chain_id == self.chain_id,
                    RelayerSpend.day_start_ms == now_ms - now_ms % DAY_MS,
                )
            )
            return {r.share_key: (r.transactions, r.gas) for r in rows}

    async def set_aside(self, owner: str) -> OwnerSetAside | None:
        async with self.services.db.sessions() as session:
            return await session.get(OwnerSetAside, (self.chain_id, owner.lower()))

    async def parked(self) -> list[ParkedEscrow]:
        return await parked_escrows(self.services.db, self.chain_id)


MakeWorld = Callable[..., Awaitable[World]]


@pytest.fixture
async def make_world(database_url: str) -> AsyncIterator[MakeWorld]:
    async with worlds(database_url, World) as make:
        yield make


def owners_of(world: World) -> list[str]:
    return [sent.owner for sent in sent_withdraws(world.fake)]


async def test_sweeps_stop_at_the_chains_daily_count_and_go_on_the_next_day(
    make_world: MakeWorld,
) -> None:
    world = await make_world(relayer_chain_tx_per_day=2)
    owners = [new_owner().address for _ in range(3)]
    for owner in owners:
        await world.paid(owner, "1")

    sent = await world.plan()
    again = await world.plan()

    assert len(sent) == 2 and again == []
    assert len(world.fake.sent) == 2
    spend = await world.spend()
    assert spend["*"] == (2, 2 * SWEEP_GAS)
    assert sorted(k for k in spend if k != "*") == sorted(o.lower() for o in owners_of(world))
    waiting = next(o for o in owners if o not in owners_of(world))

    world.clock.advance(DAY_MS)
    (late,) = await world.plan()

    assert owners_of(world)[-1] == waiting
    assert await world.spend() == {"*": (1, SWEEP_GAS), waiting.lower(): (1, SWEEP_GAS)}
    assert late.owner_key == waiting.lower()


async def test_an_owners_share_of_the_days_gas_bounds_its_sweeps_not_other_owners(
    make_world: MakeWorld,
) -> None:
    # Room for one sweep of an owner a day, by gas (paid invoices add none here).
    world = await make_world(
        relayer_owner_gas_per_day=SWEEP_GAS + 1,
        withdrawal_batch_size=1,
        relayer_sweep_gas_per_paid_invoice=0,
    )
    owner, other = new_owner().address, new_owner().address
    for _ in range(3):
        await world.paid(owner, "1")
    await world.paid(other, "1")
    simulations_before = len(world.fake.simulated)

    sent = await world.plan()

    assert sorted(owners_of(world)) == sorted([owner, other])
    assert len(sent) == 2
    # The owner's two other batches waited without a simulation.
    assert len(world.fake.simulated) - simulations_before == 2
    assert await world.spend() == {
        "*": (2, 2 * SWEEP_GAS),
        owner.lower(): (1, SWEEP_GAS),
        other.lower(): (1, SWEEP_GAS),
    }


@pytest.mark.slow
@pytest.mark.timeout(300)  # 144 intervals: about 50 s on SQLite, more on a loaded machine
async def test_a_busy_merchants_thousand_sweeps_a_day_go_out_every_interval(
    make_world: MakeWorld,
) -> None:
    """1,008 invoices paid over a UTC day, 7 in each 10-minute interval, each interval's
    swept in one withdraw of 7 native escrows (about 312,000 gas: bench/gas.py). Their 144
    transactions ask 59M gas, more than the owner's base share of 50M: the paid invoices
    take it further."""
    # The default budgets; settled escrows are read again for one interval only (the late
    # payment window), so the passes do not read the day's swept escrows again and again.
    world = await make_world(late_payment_window_s=600)
    world.fake.gas_estimate = 312_000
    sweep_gas = 312_000 * 5 // 4 + 20_000
    world.clock.advance(DAY_MS - world.clock.now_ms() % DAY_MS)  # a UTC day's start
    owner = new_owner().address
    escrows_per_sweep = []

    for interval in range(144):
        if interval:
            world.clock.advance(600_000)
        paid = [await world.paid(owner, "0.01") for _ in range(7)]
        before = len(sent_withdraws(world.fake))
        await world.plan()
        await world.settle()
        escrows_per_sweep.append([len(w.salts) for w in sent_withdraws(world.fake)[before:]])
        assert {(await reload(world.services, i)).status for i in paid} == {"completed"}

    assert escrows_per_sweep == [[7]] * 144
    assert sum(len(w.salts) for w in sent_withdraws(world.fake)) == 1_008
    assert (await world.spend())[owner.lower()] == (144, 144 * sweep_gas)
    assert 144 * sweep_gas > world.services.settings.relayer_owner_gas_per_day


async def test_a_strangers_dust_is_swept_within_the_owners_base_share_and_never_holds_paid_sweeps(
    make_world: MakeWorld,
) -> None:
    """A stranger pays dust into an owner's settled escrows again and again: their sweeps
    stop at the owner's base share (here 2 transactions a day), while the sweeps of the
    owner's newly paid invoices still go out."""
    world = await make_world(relayer_owner_tx_per_day=2)
    world.clock.advance(DAY_MS - world.clock.now_ms() % DAY_MS)
    owner = new_owner().address
    sold = [await world.paid(owner, "1") for _ in range(5)]
    (first,) = await world.plan()
    await world.settle()
    dust_sweeps = []

    for _ in range(3):
        for invoice in sold:
            world.fake.pay(invoice.payment_address, 1)  # a stranger's dust
        dust_sweeps.append(len(await world.plan()))
        await world.settle()
    newly_paid = [await world.paid(owner, "1") for _ in range(3)]
    for invoice in sold:
        world.fake.pay(invoice.payment_address, 1)
    (paid_sweep,) = await world.plan()

    assert dust_sweeps == [1, 0, 0]  # the base share: 2 a day, the first sweep included
    swept = sent_withdraws(world.fake)[-1]
    assert swept.tx_hash == paid_sweep.tx_hash
    assert len(swept.salts) == 3
    assert {(await reload(world.services, i)).status for i in newly_paid} == {"paid"}
    assert (await world.spend())[owner.lower()] == (3, 3 * SWEEP_GAS)


async def test_a_sweep_mined_reverted_parks_its_escrows_with_backoff_like_a_failed_simulation(
    make_world: MakeWorld,
) -> None:
    world = await make_world(
        withdrawal_park_retry_s=60, withdrawal_park_retry_max_s=150, relayer_owner_revert_retry_s=1
    )
    owner = new_owner().address
    invoices = [await world.paid(owner, "1"), await world.paid(owner, "2")]
    (sweep,) = await world.plan()
    reverted_at = world.clock.now_ms()

    (failed,) = await world.revert_all()
    world.clock.advance(1_000)  # the owner's own wait is over; its escrows' is not
    early = await world.plan()
    parked = await world.parked()

    assert (failed.id, failed.status) == (sweep.id, TxStatus.FAILED)
    assert early == [] and len(world.fake.sent) == 1
    assert sorted((p.invoice_id, p.kind, p.attempts, p.next_retry_at) for p in parked) == sorted(
        (i.id, "failing", 1, reverted_at + 60_000) for i in invoices
    )
    assert {p.reason for p in parked} == {f"the mined sweep {sweep.tx_hash} reverted"}
    assert {p.balance_raw for p in parked} == {i.required_raw for i in invoices}

    world.clock.set(reverted_at + 60_000)
    (retried,) = await world.plan()
    (again,) = await world.revert_all()
    parked = await world.parked()

    assert again.id == retried.id
    assert {(p.attempts, p.next_retry_at) for p in parked} == {(2, reverted_at + 60_000 + 120_000)}


async def test_an_owner_whose_relayed_transactions_revert_is_set_aside_with_backoff(
    make_world: MakeWorld,
) -> None:
    world = await make_world(relayer_owner_revert_retry_s=100, relayer_owner_revert_retry_max_s=250)
    owner, other = new_owner().address, new_owner().address
    await world.paid(owner, "1")
    await world.plan()
    await world.revert_all()
    reverted_at = world.clock.now_ms()
    # A new escrow of the same owner (not parked), and another owner's.
    await world.paid(owner, "3")
    await world.paid(other, "1")
    simulations_before = len(world.fake.simulated)

    during = await world.plan()
    with pytest.raises(SetAside) as refused:
        await relay_meta(world.services, meta_call(world, owner))

    assert [row.owner_key for row in during] == [other.lower()]
    assert len(world.fake.simulated) - simulations_before == 1  # the owner's batch: none
    assert refused.value.retry_after_s == 100
    held = await world.set_aside(owner)
    assert held is not None
    assert (held.reverts, held.next_retry_at) == (1, reverted_at + 100_000)
    assert held.reason.startswith("withdraw 0x") and held.reason.endswith(" reverted")

    world.clock.advance(100_000)
    (after,) = await world.plan()
    await world.revert_all()
    held = await world.set_aside(owner)

    assert after.owner_key == owner.lower()
    assert held is not None
    assert (held.reverts, held.next_retry_at) == (2, world.clock.now_ms() + 200_000)

    world.clock.advance(200_000)
    await world.paid(owner, "5")
    (confirmed,) = await world.plan()
    (done,) = await world.settle()

    assert (done.id, done.status) == (confirmed.id, TxStatus.CONFIRMED)
    assert await world.set_aside(owner) is None  # a confirmed transaction ends it


def meta_call(world: World, owner: str) -> MetaCall:
    call = Call(TxPurpose.SET_FEE, world.fake.factory, b"\x01" + bytes(31))
    return MetaCall(world.chain_id, owner, 0, call)


async def test_signers_without_a_paid_invoice_share_one_owners_share(
    make_world: MakeWorld,
) -> None:
    world = await make_world(relayer_owner_tx_per_day=2, relayer_meta_per_owner_per_day=20)
    established = new_owner().address
    await world.paid(established, "1")
    fresh = [new_owner().address for _ in range(4)]

    sent = []
    refused: list[Any] = []
    for wallet in fresh:
        try:
            sent.append(await relay_meta(world.services, meta_call(world, wallet)))
        except BudgetExhausted as exc:
            refused.append(exc)
    own = await relay_meta(world.services, meta_call(world, established))

    assert [row.owner_key for row in sent] == [w.lower() for w in fresh[:2]]
    assert len(refused) == 2
    assert own.owner_key == established.lower()
    assert len(world.fake.sent) == 3
    assert await world.spend() == {
        "*": (3, 3 * SWEEP_GAS),
        "newcomers": (2, 2 * SWEEP_GAS),
        established.lower(): (1, SWEEP_GAS),
    }
    assert Spender.owner(established) == Spender(established.lower(), established.lower())


async def test_housekeeping_deletes_the_spend_counts_of_days_before_yesterday(
    own_database: str,
) -> None:
    async with worlds(own_database, World) as make:
        world = await make()
        await world.paid(new_owner().address, "1")
        await world.plan()
        first_day = await world.spend()
        world.clock.advance(DAY_MS)
        await housekeeping.run_once(world.services)
        kept = await counts_of_days(world)
        world.clock.advance(DAY_MS)
        await housekeeping.run_once(world.services)
        purged = await counts_of_days(world)

    assert first_day["*"] == (1, SWEEP_GAS)
    assert kept == 2  # yesterday's: the chain's and the owner's
    assert purged == 0


async def counts_of_days(world: World) -> int:
    async with world.services.db.sessions() as session:
        rows = await session.scalars(
            select(RelayerSpend).where(RelayerSpend.chain_id == world.chain_id)
        )
        return len(list(rows))


async def test_a_batch_over_the_budget_waits_until_the_next_day_logged_once(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    world = await make_world(
        relayer_owner_tx_per_day=1, withdrawal_batch_size=1, relayer_sweep_gas_per_paid_invoice=0
    )
    owner = new_owner().address
    for _ in range(2):
        await world.paid(owner, "1")
    backoff = Backoff(1.0, 300.0)

    with caplog.at_level(logging.WARNING, logger="invoicing.settlement.withdrawals"):
        passes = [await plan(world, backoff) for _ in range(3)]
        world.clock.advance(DAY_MS - world.clock.now_ms() % DAY_MS)
        next_day = await plan(world, backoff)

    assert [len(sent) for sent in passes] == [1, 0, 0]
    assert len(next_day) == 1
    waits = [r.getMessage() for r in caplog.records if "waits" in r.getMessage()]
    assert len(waits) == 1
    assert "budget for this owner" in waits[0]


async def plan(world: World, backoff: Backoff) -> list[RelayerTransaction]:
    return await plan_withdrawals(
        world.services, world.fake, world.relayer, full=True, backoff=backoff
    )
