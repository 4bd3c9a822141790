"""Withdrawals on FakeChain and a real database (no node): a failing batch is split down to
the escrow that fails, which is parked with its reason and retried with backoff; a sweep
that moved nothing from an escrow neither completes it nor repeats every pass; an RPC error
fails one batch or one chain, never the others."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from invoicing.chain.abi import selector
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.chains import ChainRegistry
from invoicing.chain.fake import FakeChain
from invoicing.db import Database
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.settlement import worker as settlement_worker
from invoicing.settlement.backoff import Backoff
from invoicing.settlement.claims import sweep_counts
from invoicing.settlement.parking import parked_escrows
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import Planning, park_escrows, plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    ParkedEscrow,
    TxStatus,
    Withdrawal,
    WithdrawalItem,
)
from tests.support.monitoring import TOKEN, fake_services, new_invoice, reload
from tests.support.settlement import (
    SettlementWorld,
    mine_withdraws,
    new_chain,
    sent_withdraws,
    worlds,
)
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

ETH = 10**18
HOUR_MS = 3_600_000


def revert(owner: str) -> ContractRevert:
    """The factory's NativeTransferFailed(owner), as a simulation reports it."""
    data = selector("NativeTransferFailed(address)") + bytes(12) + bytes.fromhex(owner[2:])
    return ContractRevert(3, "execution reverted", data)


@dataclass
class World(SettlementWorld):
    async def plan(self, full: bool = True, backoff: Backoff | None = None) -> list[Any]:
        return await plan_withdrawals(
            self.services, self.fake, self.relayer, full=full, backoff=backoff
        )

    async def parked(self) -> list[ParkedEscrow]:
        return await parked_escrows(self.services.db, self.chain_id)


MakeWorld = Callable[..., Awaitable[World]]


@pytest.fixture
async def make_world(database_url: str) -> AsyncIterator[MakeWorld]:
    async with worlds(database_url, World) as make:
        yield make


def salt_of(invoice: Invoice) -> bytes:
    return bytes.fromhex(invoice.salt[2:])


async def items_of(services: Services, invoice: Invoice) -> list[WithdrawalItem]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WithdrawalItem)
            .join(Withdrawal, Withdrawal.id == WithdrawalItem.withdrawal_id)
            .where(WithdrawalItem.invoice_id == invoice.id)
            .order_by(Withdrawal.created_at)
        )
        return list(rows)


async def states(services: Services, invoices: list[Invoice]) -> list[tuple[str, bool, str]]:
    rows = [await reload(services, i) for i in invoices]
    return [(r.status, r.withdrawn, r.swept_raw) for r in rows]


async def test_a_failing_escrow_is_split_out_of_its_batch_and_parked_with_its_reason(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    # Batches follow the invoice ids; the third one fails.
    invoices = sorted([await world.paid(owner, str(n)) for n in range(1, 6)], key=lambda i: i.id)
    bad = invoices[2]
    world.fake.simulation_errors[salt_of(bad)] = revert(owner)
    now = world.clock.now_ms()

    sent = await world.plan()

    # The batch, its halves, and the failing half's halves: five simulations, two sends.
    assert len(world.fake.simulated) == 5
    assert [w.salts for w in sent_withdraws(world.fake)] == [
        [salt_of(i) for i in invoices[:2]],
        [salt_of(i) for i in invoices[3:]],
    ]
    assert len(sent) == 2
    (parked,) = await world.parked()
    assert (parked.invoice_id, parked.kind, parked.attempts, parked.balance_raw) == (
        bad.id,
        "failing",
        1,
        bad.required_raw,
    )
    assert (parked.reason, parked.next_retry_at) == (
        "withdraw reverts with NativeTransferFailed",
        now + HOUR_MS,
    )
    assert (parked.payment_address, parked.owner_address) == (bad.payment_address, owner)

    finished = await world.settle()

    assert [row.status for row in finished] == [TxStatus.CONFIRMED, TxStatus.CONFIRMED]
    assert await states(world.services, invoices) == [
        ("paid", False, "0") if i is bad else ("completed", True, i.required_raw) for i in invoices
    ]
    assert world.fake.native[owner.lower()] == 15 * ETH - int(bad.required_raw)
    assert world.fake.native[bad.payment_address.lower()] == int(bad.required_raw)
    assert await items_of(world.services, bad) == []
    assert [p.invoice_id for p in await world.parked()] == [bad.id]


async def test_a_parked_escrow_is_retried_with_doubling_delays_up_to_the_cap(
    make_world: MakeWorld,
) -> None:
    world = await make_world(withdrawal_park_retry_s=60, withdrawal_park_retry_max_s=150)
    owner = new_owner().address
    bad = await world.paid(owner, "0.5")
    world.fake.simulation_errors[salt_of(bad)] = revert(owner)
    start = world.clock.now_ms()

    await world.plan()
    (first,) = await world.parked()
    world.clock.advance(59_999)
    early = await world.plan()
    (waiting,) = await world.parked()
    world.clock.advance(1)
    await world.plan()
    (second,) = await world.parked()
    world.clock.advance(120_000)
    await world.plan()
    (third,) = await world.parked()

    assert early == [] and len(world.fake.simulated) == 3  # none while it waited
    assert (first.attempts, first.next_retry_at) == (1, start + 60_000)
    assert (waiting.attempts, waiting.next_retry_at) == (1, start + 60_000)
    assert (second.attempts, second.next_retry_at) == (2, start + 60_000 + 120_000)
    assert (third.attempts, third.next_retry_at) == (3, start + 180_000 + 150_000)  # capped
    assert world.fake.sent == []

    del world.fake.simulation_errors[salt_of(bad)]
    world.clock.advance(150_000)
    (sent,) = await world.plan()
    await world.settle()

    assert await states(world.services, [bad]) == [("completed", True, str(ETH // 2))]
    assert await world.parked() == []
    assert world.fake.native[owner.lower()] == ETH // 2


async def test_a_parked_escrow_is_tried_again_as_soon_as_its_balance_changes(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    bad = await world.paid(owner, "1")
    world.fake.simulation_errors[salt_of(bad)] = revert(owner)
    await world.plan()
    world.clock.advance(1_000)

    unchanged = await world.plan()
    world.fake.pay(bad.payment_address, 7)
    await world.plan()
    (parked,) = await world.parked()

    assert unchanged == [] and len(world.fake.simulated) == 2
    assert (parked.attempts, parked.balance_raw) == (2, str(ETH + 7))
    assert parked.next_retry_at == world.clock.now_ms() + 2 * HOUR_MS
    assert world.fake.sent == []


async def test_a_sweep_that_moved_nothing_from_one_escrow_completes_only_the_others(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    good, blocked, other = sorted(
        [await world.paid(owner, a, TOKEN) for a in ("1", "2", "4")], key=lambda i: i.id
    )
    held = blocked.required_raw
    moved = int(good.required_raw) + int(other.required_raw)

    (sent,) = await world.plan()
    (done,) = await world.settle(blocked=(blocked.payment_address,))

    assert (done.id, done.status) == (sent.id, TxStatus.CONFIRMED)
    assert await states(world.services, [good, blocked, other]) == [
        ("completed", True, good.required_raw),
        ("paid", False, "0"),
        ("completed", True, other.required_raw),
    ]
    assert [
        [i.moved_raw for i in await items_of(world.services, x)] for x in (good, blocked, other)
    ] == [[good.required_raw], ["0"], [other.required_raw]]
    (parked,) = await world.parked()
    assert (parked.invoice_id, parked.kind, parked.attempts, parked.balance_raw) == (
        blocked.id,
        "no_effect",
        1,
        held,
    )
    assert parked.reason == f"the sweep moved nothing; the escrow still holds {held}"
    assert world.fake.tokens[TOKEN.lower()][owner.lower()] == moved
    assert world.fake.tokens[TOKEN.lower()][blocked.payment_address.lower()] == int(held)
    async with world.services.db.sessions() as session:
        withdrawal = await session.scalar(
            select(Withdrawal).where(Withdrawal.relayer_tx_id == sent.id)
        )
    assert withdrawal is not None and withdrawal.swept_raw == str(moved)

    # Not swept again on the next passes while its balance stays the same.
    simulations = len(world.fake.simulated)
    world.clock.advance(600_000)
    assert await world.plan() == []
    assert len(world.fake.simulated) == simulations

    # A payment into it changes its balance: swept again (now unblocked), it completes.
    world.fake.pay(blocked.payment_address, 5, TOKEN)
    (again,) = await world.plan()
    await world.settle()

    assert [w.salts for w in sent_withdraws(world.fake)][-1] == [salt_of(blocked)]
    assert await states(world.services, [blocked]) == [("completed", True, str(int(held) + 5))]
    assert await world.parked() == []
    assert world.fake.tokens[TOKEN.lower()][owner.lower()] == 7_000_005


async def test_a_paid_escrow_emptied_outside_the_service_is_parked_not_read_every_pass(
    make_world: MakeWorld,
) -> None:
    world = await make_world(withdrawal_batch_size=1)
    owner = new_owner().address
    emptied = await world.paid(owner, "1")
    full = await world.paid(owner, "2")
    # The owner swept it without the service (``withdraw`` is permissionless).
    world.fake.native[owner.lower()] = world.fake.native.pop(emptied.payment_address.lower())

    (sent,) = await world.plan()
    reads = world.fake.balance_calls
    assert await world.plan(full=False) == []

    assert [w.salts for w in sent_withdraws(world.fake)] == [[salt_of(full)]]
    assert world.fake.balance_calls == reads  # the parked escrow is not read again
    (parked,) = await world.parked()
    assert (parked.invoice_id, parked.kind, parked.attempts, parked.balance_raw) == (
        emptied.id,
        "no_effect",
        1,
        "0",
    )
    assert parked.reason == "the escrow holds nothing to sweep (swept outside this service?)"
    await world.settle()
    assert await states(world.services, [emptied, full]) == [
        ("paid", False, "0"),
        ("completed", True, str(2 * ETH)),
    ]
    assert world.fake.native[owner.lower()] == 3 * ETH


async def test_an_escrow_another_process_swept_after_this_pass_read_it_is_not_parked(
    make_world: MakeWorld,
) -> None:
    """Two processes sweep at once: this pass read the paid invoice, then the other claimed,
    swept and settled it before this pass counted its withdrawals and read its (now empty)
    balance. The counts match what this pass saw, yet the escrow is not parked as emptied
    outside the service."""
    world = await make_world()
    read_by_this_pass = await world.paid(new_owner().address, "1")
    await world.plan()  # the other process
    await world.settle()
    async with world.services.db.sessions() as session:
        seen = await sweep_counts(session, [read_by_this_pass.id])
    planning = Planning(
        world.services, world.fake, world.relayer, world.clock.now_ms(), seen, {}, {}
    )
    planning.balances[read_by_this_pass.id] = 0

    await park_escrows(planning, planning.stale_paid([read_by_this_pass]))

    assert await world.parked() == []
    assert await states(world.services, [read_by_this_pass]) == [("completed", True, str(ETH))]


async def test_an_unreadable_balance_is_never_swept_and_an_unreadable_result_uses_the_event(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    unreadable = await world.paid(owner, "1", TOKEN)
    world.fake.unreadable_tokens.add(TOKEN.lower())

    assert await world.plan() == []

    assert world.fake.simulated == [] and world.fake.sent == []
    (parked,) = await world.parked()
    assert (parked.invoice_id, parked.kind, parked.reason, parked.balance_raw) == (
        unreadable.id,
        "no_effect",
        "its balance is unreadable",
        "0",
    )
    assert await states(world.services, [unreadable]) == [("paid", False, "0")]

    # Readable again and due: swept; the balances after it are unreadable once more, but
    # the Withdrawn event's total covers both escrows, so both completed.
    world.fake.unreadable_tokens.clear()
    world.clock.advance(HOUR_MS)
    other = await world.paid(owner, "2", TOKEN)
    (sent,) = await world.plan()
    world.fake.unreadable_tokens.add(TOKEN.lower())
    (done,) = await world.settle()

    assert (done.id, done.status) == (sent.id, TxStatus.CONFIRMED)
    assert await states(world.services, [unreadable, other]) == [
        ("completed", True, "1000000"),
        ("completed", True, "2000000"),
    ]
    assert await world.parked() == []
    assert world.fake.tokens[TOKEN.lower()][owner.lower()] == 3_000_000


async def test_a_json_rpc_error_fails_one_batch_and_backs_it_off_while_others_go_on(
    make_world: MakeWorld,
) -> None:
    world = await make_world(settlement_poll_interval_s=2, settlement_backoff_max_s=3)
    first, second = new_owner().address, new_owner().address
    failing = await world.paid(first, "1")
    fine = await world.paid(second, "2")
    world.fake.simulation_errors[salt_of(failing)] = RpcError(-32005, "limit exceeded")
    backoff = Backoff(2, 3)

    (sent,) = await world.plan(backoff=backoff)
    world.clock.advance(1_999)
    assert await world.plan(backoff=backoff) == []  # still backing off: not even simulated
    simulated_while_waiting = len(world.fake.simulated)
    world.clock.advance(1)
    assert await world.plan(backoff=backoff) == []  # tried again, fails again
    failures = backoff.failures((first.lower(), "0x" + "00" * 20))

    assert [w.owner for w in sent_withdraws(world.fake)] == [second]
    assert simulated_while_waiting == 2 and len(world.fake.simulated) == 3
    assert failures == 2
    assert await world.parked() == []  # the node's trouble is not the escrow's fault
    await world.settle()
    assert await states(world.services, [failing, fine]) == [
        ("paid", False, "0"),
        ("completed", True, str(2 * ETH)),
    ]


async def test_an_rpc_error_after_a_sweep_leaves_it_pending_until_the_next_pass(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    owner = new_owner().address
    invoice = await world.paid(owner, "1")
    (sent,) = await world.plan()
    mine_withdraws(world.fake)
    world.fake.errors["balances"] = RpcError(-32000, "header not found")

    assert await track_pending(world.services, world.fake, world.relayer) == []
    assert (await reload(world.services, invoice)).status == "paid"

    del world.fake.errors["balances"]
    (done,) = await track_pending(world.services, world.fake, world.relayer)
    assert (done.id, done.status) == (sent.id, TxStatus.CONFIRMED)
    assert await states(world.services, [invoice]) == [("completed", True, str(ETH))]


async def test_two_processes_park_a_failing_escrow_once(
    make_world: MakeWorld, database_url: str
) -> None:
    world = await make_world()
    owner = new_owner().address
    bad = await world.paid(owner, "1")
    world.fake.simulation_errors[salt_of(bad)] = revert(owner)
    other_db = Database(database_url)
    other = Services(world.services.settings, other_db, world.services.chains, world.clock)
    try:
        await asyncio.gather(
            world.plan(),
            plan_withdrawals(
                other,
                world.fake,
                Relayer(world.fake, other_db, world.clock, world.relayer.limits),
                full=True,
            ),
        )
    finally:
        await other_db.dispose()

    (parked,) = await world.parked()
    assert (parked.invoice_id, parked.attempts) == (bad.id, 1)
    assert parked.next_retry_at == world.clock.now_ms() + HOUR_MS


async def test_operators_list_parked_escrows_with_their_reason_and_next_try(
    make_world: MakeWorld, database_url: str
) -> None:
    world = await make_world()
    owner = new_owner().address
    bad = await world.paid(owner, "1")
    world.fake.simulation_errors[salt_of(bad)] = revert(owner)
    await world.plan()
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
    }

    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "invoicing"),
        "parked",
        "--chain-id",
        str(world.chain_id),
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=300)

    assert process.returncode == 0
    assert [json.loads(line) for line in out.decode().splitlines()] == [
        {
            "invoice": bad.id,
            "chainId": world.chain_id,
            "ownerAddress": owner,
            "tokenAddress": None,
            "paymentAddress": bad.payment_address,
            "kind": "failing",
            "reason": "withdraw reverts with NativeTransferFailed",
            "balanceRaw": str(ETH),
            "attempts": 1,
            "nextRetryAt": world.clock.now_ms() + HOUR_MS,
            "parkedAt": world.clock.now_ms(),
        }
    ]


@pytest.mark.parametrize(
    "error",
    [
        ChainUnavailable("RPC unreachable: connection refused"),
        TimeoutError("read timed out"),
        RpcError(-32603, "internal error"),
        KeyError("result"),  # a bug on one chain's path: logged with its traceback
    ],
    ids=["unreachable", "timeout", "json-rpc-error", "unexpected"],
)
async def test_the_worker_goes_on_with_other_chains_while_one_fails(
    database_url: str, error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    broken, healthy = new_chain(), new_chain()
    registry = ChainRegistry({c.config.chain_id: c for c in (broken, healthy)})
    base = fake_services(
        database_url, healthy, settlement_poll_interval_s=0.01, settlement_backoff_max_s=0.05
    )
    services = Services(base.settings, base.db, registry, base.clock)
    owner = new_owner().address
    stuck = await paid_on(services, broken, owner, "1")
    swept = await paid_on(services, healthy, owner, "2")
    broken.errors["balances"] = error
    stop = asyncio.Event()
    caplog.set_level(logging.WARNING, "invoicing.settlement.worker")
    task = asyncio.create_task(settlement_worker.run(services, stop))
    try:
        await until(lambda: len(sent_withdraws(healthy)) == 1)
        mine_withdraws(healthy)
        await until_status(services, swept, "completed")
        await until(lambda: len(failures_of(caplog, broken)) >= 2)  # retried, backing off
        assert not task.done()
        assert (await reload(services, stuck)).status == "paid" and broken.sent == []

        del broken.errors["balances"]  # the node is back: that chain catches up
        await until(lambda: len(sent_withdraws(broken)) == 1)
        mine_withdraws(broken)
        await until_status(services, stuck, "completed")
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)
        await services.db.dispose()

    assert healthy.native[owner.lower()] == 2 * ETH
    assert broken.native[owner.lower()] == ETH
    assert len(sent_withdraws(healthy)) == 1


def failures_of(caplog: pytest.LogCaptureFixture, chain: FakeChain) -> list[logging.LogRecord]:
    wanted = f"settlement on chain {chain.config.chain_id} "
    messages = [(r, r.getMessage()) for r in caplog.records]
    return [r for r, m in messages if m.startswith(wanted) and ("failed" in m or "crashed" in m)]


async def test_the_worker_without_a_relayer_key_waits_for_stop_without_spinning(
    database_url: str,
) -> None:
    chain = FakeChain(chain_id=random.randrange(10**6, 10**9))  # no relayer key
    services = fake_services(database_url, chain)
    stop = asyncio.Event()
    task = asyncio.create_task(settlement_worker.run(services, stop))
    try:
        await asyncio.sleep(0.1)
        running = not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=1)
        await services.db.dispose()

    assert running


async def paid_on(services: Services, chain: FakeChain, owner: str, amount: str) -> Invoice:
    invoice = await new_invoice(services, chain, amount=amount, owner_address=owner)
    chain.pay(invoice.payment_address, int(invoice.required_raw))
    assert (await recheck_invoice(services, invoice)).status == "paid"
    return invoice


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def until_status(services: Services, invoice: Invoice, status: str) -> None:
    for _ in range(1000):
        if (await reload(services, invoice)).status == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{invoice.id} never became {status}")
