"""Escrows watched for life, on FakeChain and a real database (no node): when the low-rate
lifetime pass is due and what it reads (calls counted), what it records, and how the
settlement worker sweeps what it found (own token of a settled invoice, other assets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import select, update

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.answers import ContractRevert
from invoicing.db import Database
from invoicing.invoices.owner_view import other_balances_in
from invoicing.invoices.service import delete_invoice
from invoicing.monitor import worker as monitor_worker
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.lifetime import NEVER_MS, PAGES_PER_PASS, run_lifetime_pass
from invoicing.settlement.worker import settlement_step
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import EscrowAsset, ParkedEscrow, RelayerTransaction
from tests.support.monitoring import TOKEN, new_invoice, reload
from tests.support.settlement import SettlementWorld, sent_withdraws, worlds
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

ETH = 10**18
HOUR_MS = 3_600_000
WINDOW_S = 3600
DAY_MS = 86_400_000
OTHER_TOKEN = "0x" + "5d" * 20


async def other_balances(db: Database, invoice_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The ``otherBalances`` of the owner's view, by invoice."""
    async with db.sessions() as session:
        return await other_balances_in(session, invoice_ids)


@dataclass
class World(SettlementWorld):
    async def completed(self, owner: str, amount: str, token: str | None = None) -> Invoice:
        invoice = await self.paid(owner, amount, token)
        await self.step()
        await self.settle()
        done = await reload(self.services, invoice)
        assert done.status == "completed"
        return done

    async def step(self) -> list[RelayerTransaction]:
        """A full settlement pass (the worker's step: follow, sweep, sweep other assets)."""
        return await settlement_step(self.services, self.fake, self.relayer, True)

    async def lifetime(self) -> Any:
        return await run_lifetime_pass(self.services, self.fake)

    def after_window(self, invoice: Invoice) -> None:
        """Move the clock past the invoice's late-payment window (its first lifetime check)
        and past the window the withdrawals keep reading settled escrows."""
        self.clock.set(invoice.expires_at + 2 * WINDOW_S * 1000 + 1)

    async def assets(self) -> list[tuple[str, str, bool, str]]:
        async with self.services.db.sessions() as session:
            rows = await session.scalars(
                select(EscrowAsset)
                .where(EscrowAsset.chain_id == self.fake.config.chain_id)
                .order_by(EscrowAsset.invoice_id, EscrowAsset.token_address)
            )
            return [(r.invoice_id, r.token_address, r.own, r.balance_raw) for r in rows]


MakeWorld = Callable[..., Awaitable[World]]


@pytest.fixture
async def make_world(database_url: str) -> AsyncIterator[MakeWorld]:
    async with worlds(database_url, World, late_payment_window_s=WINDOW_S) as make:
        yield make


async def test_an_escrow_is_first_read_when_its_late_window_closes_then_once_per_interval(
    make_world: MakeWorld,
) -> None:
    world = await make_world(lifetime_check_interval_s=86400)
    invoice = await new_invoice(world.services, world.fake, expires_in_ms=HOUR_MS)
    world.fake.pay(invoice.payment_address, ETH // 10)  # a partial payment: it held funds
    assert (await recheck_invoice(world.services, invoice)).balance_raw == str(ETH // 10)
    stored = await reload(world.services, invoice)
    assert stored.lifetime_check_at == invoice.expires_at + WINDOW_S * 1000
    base = world.fake.balance_calls

    world.clock.set(stored.lifetime_check_at - 1)
    assert (await world.lifetime()).checked == 0
    assert world.fake.balance_calls == base

    world.clock.set(stored.lifetime_check_at)
    result = await world.lifetime()
    # One balancesOf per asset: native and the allow-listed TUSD.
    assert (result.checked, world.fake.balance_calls - base) == (1, 2)
    assert (await reload(world.services, invoice)).lifetime_check_at == (
        stored.lifetime_check_at + DAY_MS
    )

    # At rest nothing is due: no read at all, however often the pass runs.
    world.clock.advance(DAY_MS - 1)
    for _ in range(5):
        assert (await world.lifetime()).checked == 0
    assert world.fake.balance_calls - base == 2
    world.clock.advance(1)
    assert (await world.lifetime()).checked == 1
    assert world.fake.balance_calls - base == 4


async def test_escrows_that_never_held_funds_are_read_once_after_their_window_then_left(
    make_world: MakeWorld,
) -> None:
    """Creating and deleting invoices in a loop leaves no daily reads behind: an escrow that
    never held funds is read once when its window closes; one that did is read for life."""
    world = await make_world()
    owner = new_owner().address
    looped = [await new_invoice(world.services, world.fake, owner_address=owner) for _ in range(4)]
    for invoice in looped:
        await delete_invoice(
            world.services.db, owner.lower(), invoice.chain_id, invoice.invoice_id,
            world.clock.now_ms(), world.services.settings,
        )  # fmt: skip
    partial = await new_invoice(world.services, world.fake, owner_address=owner)
    world.fake.pay(partial.payment_address, ETH // 10)
    await recheck_invoice(world.services, partial)
    late = await new_invoice(world.services, world.fake, owner_address=owner)
    world.after_window(late)
    world.fake.pay(late.payment_address, ETH // 20)  # after its window, before its last read

    first = await world.lifetime()
    calls = world.fake.balance_calls
    world.clock.advance(DAY_MS)
    second = await world.lifetime()
    world.clock.advance(365 * DAY_MS)
    third = await world.lifetime()

    assert first.checked == 6
    assert (second.checked, third.checked) == (2, 2)  # the partial one and the late one
    assert world.fake.balance_calls - calls == 2 * 2  # two passes, two assets, one chunk each
    for invoice in looped:
        assert (await reload(world.services, invoice)).lifetime_check_at == NEVER_MS
    for invoice in (partial, late):
        assert (await reload(world.services, invoice)).lifetime_check_at == (
            world.clock.now_ms() + DAY_MS
        )


async def test_the_pass_reads_in_chunks_one_call_per_asset_and_chunk(
    make_world: MakeWorld,
) -> None:
    world = await make_world(monitor_batch_size=2)
    world.fake.add_token(OTHER_TOKEN, 18, "OTHER")
    invoices = [await new_invoice(world.services, world.fake) for _ in range(5)]
    world.after_window(invoices[-1])

    result = await world.lifetime()

    # Five escrows in chunks of two: three chunks, three assets each.
    assert (result.checked, world.fake.balance_calls) == (5, 9)


async def test_funds_of_a_completed_invoice_after_its_windows_are_found_and_swept(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.completed(owner, "2")
    world.fake.pay(invoice.payment_address, 3 * ETH)
    world.after_window(invoice)
    # Past the withdrawals' own window a full pass no longer reads this escrow.
    assert await world.step() == []

    result = await world.lifetime()
    assert (result.checked, result.found) == (1, 1)
    assert await world.assets() == [(invoice.id, ZERO_ADDRESS, True, str(3 * ETH))]
    assert await other_balances(world.services.db, [invoice.id]) == {}  # own token: not shown

    sent = await world.step()
    await world.settle()

    assert len(sent) == 1
    assert world.fake.native[owner.lower()] == 5 * ETH
    done = await reload(world.services, invoice)
    assert (done.status, done.swept_raw) == ("completed", str(5 * ETH))
    assert await world.assets() == []
    assert await world.step() == []


async def test_a_token_sent_to_a_native_invoice_is_shown_then_swept_in_that_token(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.completed(owner, "1")
    world.fake.pay(invoice.payment_address, 7_000_000, TOKEN)
    world.after_window(invoice)

    await world.lifetime()

    shown = await other_balances(world.services.db, [invoice.id])
    assert shown == {
        invoice.id: [{"tokenAddress": normalize_address(TOKEN), "balanceRaw": "7000000"}]
    }
    sent = await world.step()
    (withdraw,) = sent_withdraws(world.fake)[-1:]
    assert len(sent) == 1
    assert (withdraw.owner, withdraw.token) == (owner, normalize_address(TOKEN))
    assert withdraw.salts == [bytes.fromhex(invoice.salt[2:])]
    await world.settle()

    assert world.fake.tokens[TOKEN.lower()][owner.lower()] == 7_000_000
    assert await other_balances(world.services.db, [invoice.id]) == {}
    done = await reload(world.services, invoice)
    # The invoice's own record is untouched by a sweep of another asset.
    assert (done.status, done.swept_raw) == ("completed", invoice.swept_raw)
    assert await world.assets() == []


async def test_a_sweep_finds_the_escrows_other_assets_and_a_later_pass_sweeps_them(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.paid(owner, "5", TOKEN)
    world.fake.pay(invoice.payment_address, ETH // 10)  # native coin besides the TUSD

    await world.step()
    await world.settle()  # FakeChain's token sweep leaves native coin (the factory's would not)

    assert await world.assets() == [(invoice.id, ZERO_ADDRESS, False, str(ETH // 10))]
    sent = await world.step()
    await world.settle()

    assert [w.token for w in sent_withdraws(world.fake)] == [normalize_address(TOKEN), ZERO_ADDRESS]
    assert len(sent) == 1
    assert world.fake.native[owner.lower()] == ETH // 10
    assert await world.assets() == []


async def test_other_assets_wait_while_a_payment_could_still_change_the_invoice(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await new_invoice(world.services, world.fake, owner_address=owner)
    world.fake.pay(invoice.payment_address, 1_000, TOKEN)
    async with world.services.db.transaction() as session:
        await session.execute(
            update(Invoice).where(Invoice.id == invoice.id).values(lifetime_check_at=0)
        )

    await world.lifetime()

    assert await world.assets() == [(invoice.id, TOKEN.lower(), False, "1000")]
    assert await world.step() == []  # pending: a sweep would take the payer's native coin too
    now = world.clock.now_ms()
    await delete_invoice(
        world.services.db,
        owner.lower(),
        invoice.chain_id,
        invoice.invoice_id,
        now,
        world.services.settings,
    )
    assert len(await world.step()) == 1  # cancelled: nothing can change it any more


async def test_unreadable_balances_are_unknown_never_recorded_swept_or_an_error(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.completed(owner, "1")
    world.fake.pay(invoice.payment_address, 500, TOKEN)
    world.fake.unreadable_tokens.add(TOKEN.lower())
    world.after_window(invoice)

    result = await world.lifetime()

    assert (result.checked, result.found, result.unreadable) == (1, 0, 1)
    assert await world.assets() == []
    assert await world.step() == []
    # A row found earlier stays as it was while its token reads as unreadable.
    world.fake.unreadable_tokens.clear()
    world.clock.advance(DAY_MS)
    await world.lifetime()
    world.fake.unreadable_tokens.add(TOKEN.lower())
    world.clock.advance(DAY_MS)
    await world.lifetime()
    assert await world.assets() == [(invoice.id, TOKEN.lower(), False, "500")]


async def test_an_asset_that_cannot_be_swept_waits_for_its_next_read_and_parks_nothing(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.completed(owner, "1")
    world.fake.pay(invoice.payment_address, 900, TOKEN)
    world.after_window(invoice)
    await world.lifetime()
    world.fake.simulation_errors[bytes.fromhex(invoice.salt[2:])] = ContractRevert(
        3, "execution reverted", b""
    )
    simulated = len(world.fake.simulated)

    assert await world.step() == []
    assert await world.step() == []  # not tried again before the next read

    assert len(world.fake.simulated) == simulated + 1
    async with world.services.db.sessions() as session:
        parked = select(ParkedEscrow).where(ParkedEscrow.chain_id == world.chain_id)
        assert list(await session.scalars(parked)) == []
    world.fake.simulation_errors.clear()
    world.clock.advance(DAY_MS)
    await world.lifetime()
    assert len(await world.step()) == 1


async def test_the_monitor_worker_runs_the_lifetime_pass_at_its_own_low_rate(
    make_world: MakeWorld,
) -> None:
    world = await make_world(monitor_poll_interval_s=0.01, lifetime_poll_interval_s=3600)
    owner = new_owner().address
    invoices = [await world.completed(owner, "1") for _ in range(3)]
    world.after_window(invoices[-1])
    calls = world.fake.balance_calls
    stop = asyncio.Event()
    task = asyncio.create_task(monitor_worker.watch_chain(world.services, world.fake, stop))
    await asyncio.sleep(0.5)  # dozens of monitor ticks
    stop.set()
    await asyncio.wait_for(task, timeout=10)

    # One lifetime pass (two assets, one chunk); no pending invoice, so no other read.
    assert world.fake.balance_calls - calls == 2
    for invoice in invoices:
        stored = await reload(world.services, invoice)
        assert stored.lifetime_check_at == world.clock.now_ms() + DAY_MS


async def test_a_backlog_is_read_over_several_passes_so_the_monitor_loop_goes_on(
    make_world: MakeWorld,
) -> None:
    world = await make_world(monitor_batch_size=1)
    invoices = [await new_invoice(world.services, world.fake) for _ in range(PAGES_PER_PASS + 2)]
    world.after_window(invoices[-1])

    first = await world.lifetime()
    second = await world.lifetime()

    assert (first.checked, first.more) == (PAGES_PER_PASS, True)
    assert (second.checked, second.more) == (2, False)
