"""Withdrawals on anvil against a token that fights back (contracts/test/BlockingToken.sol)
and a chain whose node refuses connections: the good escrows complete, the bad ones are
parked with their reason, and nothing else stops."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from sqlalchemy import select, update

from invoicing.auth.guard import Caller
from invoicing.chain.abi import selector
from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.clock import FakeClock
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.settlement import worker as settlement_worker
from invoicing.settlement.parking import parked_escrows
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import TxStatus, WithdrawalItem
from tests.conftest import MakeServices, chain_config
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    PAYER_KEY,
    balance_of,
    deploy_blocking_token,
    gateway,
    paid_in,
    paid_invoice,
    parked_of,
    relayer_of,
    reload,
    settle_all,
    token_call,
    with_token,
    withdrawals_of,
)

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


async def moved_of(services: Services, invoice: Invoice) -> list[str | None]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WithdrawalItem.moved_raw).where(WithdrawalItem.invoice_id == invoice.id)
        )
        return list(rows)


async def test_an_escrow_its_token_blocks_is_not_completed_nor_swept_every_pass(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    token = await deploy_blocking_token(evm)
    services = await make_services(chain=with_token(dev, token))
    clock = FakeClock(services.clock.now_ms())
    services.clock = clock
    owner = new_owner().address
    invoices = sorted(
        [await paid_in(services, evm, owner, a, token) for a in ("1", "2", "4")],
        key=lambda i: i.id,
    )
    good, blocked, other = invoices
    held = int(blocked.required_raw)
    moved = int(good.required_raw) + int(other.required_raw)
    await token_call(evm, token, "setBlocked", blocked.payment_address, True)
    chain, relayer = gateway(services), relayer_of(services)

    sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    finished = await settle_all(services)

    assert len(sent) == 1
    assert [r.status for r in finished if r.id == sent[0].id] == [TxStatus.CONFIRMED]
    assert [(await reload(services, i.id)).status for i in invoices] == [
        "completed",
        "paid",
        "completed",
    ]
    still = await reload(services, blocked.id)
    assert (still.withdrawn, still.withdrawn_at, still.swept_raw) == (False, None, "0")
    assert await balance_of(evm, owner, token) == moved
    assert [await balance_of(evm, i.payment_address, token) for i in invoices] == [0, held, 0]
    assert [await moved_of(services, i) for i in invoices] == [
        [good.required_raw],
        ["0"],
        [other.required_raw],
    ]
    (withdrawal,) = await withdrawals_of(services, blocked.id)
    assert (withdrawal.planned_raw, withdrawal.swept_raw) == (str(moved + held), str(moved))
    (parked,) = await parked_of(services, owner)
    assert (parked.invoice_id, parked.kind, parked.attempts, parked.balance_raw) == (
        blocked.id,
        "no_effect",
        1,
        str(held),
    )
    assert parked.next_retry_at == clock.now_ms() + HOUR_MS

    # The next full pass (ten minutes on) leaves it alone: same balance, retry not due.
    clock.advance(600_000)
    assert (
        await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower()) == []
    )

    # Unblocked, and its retry time has come: swept, it completes.
    await token_call(evm, token, "setBlocked", blocked.payment_address, False)
    clock.advance(HOUR_MS)
    (retry,) = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    done = await reload(services, blocked.id)
    assert (done.status, done.withdrawn, done.swept_raw) == ("completed", True, str(held))
    assert await balance_of(evm, owner, token) == moved + held
    assert await parked_of(services, owner) == []
    assert [(await reload(services, i.id)).swept_raw for i in (good, other)] == [
        good.required_raw,
        other.required_raw,
    ]


async def test_a_withdraw_that_reverts_is_parked_escrow_by_escrow_while_other_batches_go_on(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, own_database: str
) -> None:
    token = await deploy_blocking_token(evm)
    services = await make_services(database_url=own_database, chain=with_token(dev, token))
    owner, other = new_owner().address, new_owner().address
    stuck = [await paid_in(services, evm, owner, a, token) for a in ("1", "2")]
    tusd = await paid_invoice(services, evm, owner, "5", dev.token)
    native = await paid_invoice(services, evm, other, "0.003")
    # The factory cannot pay this token out: every withdraw of it reverts.
    await token_call(evm, token, "setBlocked", dev.factory, True)
    chain, relayer = gateway(services), relayer_of(services)
    now = services.clock.now_ms()

    sent = await plan_withdrawals(services, chain, relayer, full=True)
    await settle_all(services)

    assert len(sent) == 2  # the TUSD batch and the other owner's native one
    assert (await reload(services, tusd.id)).status == "completed"
    assert (await reload(services, native.id)).status == "completed"
    assert await balance_of(evm, owner, dev.token) == 5_000_000
    assert await balance_of(evm, other) == 3 * 10**15
    blocked_error = selector("SenderBlocked(address)") + bytes(12) + bytes.fromhex(dev.factory[2:])
    parked = await parked_escrows(services.db, chain.config.chain_id)
    assert sorted(
        (p.invoice_id, p.kind, p.attempts, p.balance_raw, p.reason) for p in parked
    ) == sorted(
        (i.id, "failing", 1, i.required_raw, f"withdraw reverts with 0x{blocked_error.hex()}")
        for i in stuck
    )
    assert all(now <= p.next_retry_at - HOUR_MS <= services.clock.now_ms() for p in parked)
    for invoice in stuck:
        again = await reload(services, invoice.id)
        assert (again.status, again.withdrawn, again.swept_raw) == ("paid", False, "0")
        assert await balance_of(evm, invoice.payment_address, token) == int(invoice.required_raw)
        assert await withdrawals_of(services, invoice.id) == []
    assert await balance_of(evm, owner, token) == 0

    # Parked: the next pass sends nothing and does not even simulate them.
    assert await plan_withdrawals(services, chain, relayer, full=True) == []


def refused_url() -> str:
    """An http URL on a local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.slow
async def test_the_worker_settles_one_chain_while_another_chains_node_refuses_connections(
    make_services: MakeServices,
    evm: EvmClient,
    anvil: AnvilProcess,
    dev: DevDeployment,
    own_database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead_id = dev.chain_id + 1000
    services = await make_services(
        database_url=own_database,
        chains=[
            chain_config(anvil, dev),
            chain_config(anvil, dev, chain_id=dead_id, rpc_url=refused_url()),
        ],
        settlement_poll_interval_s=0.05,
        settlement_backoff_max_s=0.2,
        withdrawal_interval_s=3600,
    )
    live = services.chains.get(dev.chain_id)
    assert isinstance(live, EvmGateway)
    owner = new_owner().address
    swept = await paid_on(services, evm, live, owner)
    stuck = await new_invoice_on(services, dead_id, owner)
    caplog.set_level(logging.WARNING, "invoicing.settlement.worker")
    stop = asyncio.Event()
    task = asyncio.create_task(settlement_worker.run(services, stop))
    try:
        # Until the live chain's sweep completed and the dead chain's step was retried.
        for _ in range(400):
            failures = [r for r in caplog.records if f"chain {dead_id} failed" in r.getMessage()]
            if (await reload(services, swept.id)).status == "completed" and len(failures) >= 2:
                break
            await asyncio.sleep(0.05)
        alive = not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)

    assert (await reload(services, swept.id)).status == "completed"
    assert await balance_of(evm, owner) == 10**15
    assert (await reload(services, stuck.id)).status == "paid"
    assert alive and len(failures) >= 2
    assert "unreachable" in failures[0].getMessage()


async def paid_on(services: Services, evm: EvmClient, chain: EvmGateway, owner: str) -> Invoice:
    invoice = await new_invoice_on(services, chain.config.chain_id, owner, paid=False)
    receipt = await evm.transact(PAYER_KEY, invoice.payment_address, value=10**15)
    assert receipt["status"] == 1
    assert (await recheck_invoice(services, invoice)).status == "paid"
    return invoice


async def new_invoice_on(
    services: Services, chain_id: int, owner: str, paid: bool = True
) -> Invoice:
    """A native invoice of 0.001 on ``chain_id``; ``paid`` marks it paid in the database
    (for a chain whose node cannot be reached to see the payment)."""
    chain = services.chains.get(chain_id)
    invoice, _ = await create_invoice(
        services.db,
        chain,
        NewInvoice(owner_address=owner, chain_id=chain_id, amount="0.001"),
        Caller(owner_key=owner.lower(), mode="api_key"),
        services.clock.now_ms(),
        services.settings.default_expiry_s,
    )
    if paid:
        async with services.db.transaction() as session:
            await session.execute(
                update(Invoice)
                .where(Invoice.id == invoice.id)
                .values(status="paid", paid=True, paid_at=services.clock.now_ms(), watch=False)
            )
    return await reload(services, invoice.id)
