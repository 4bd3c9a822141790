"""Batched withdrawals on anvil: paid → completed, exact balances, fee split, late funds."""

from __future__ import annotations

import asyncio

import pytest
from eth_account import Account

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.clock import FakeClock
from invoicing.invoices.service import delete_invoice
from invoicing.monitor.check import recheck_invoice
from invoicing.settlement import worker as settlement_worker
from invoicing.settlement.candidates import MAX_ESCROWS_PER_TX
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import TxPurpose, TxStatus, WithdrawalStatus
from tests.conftest import MakeServices
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    new_invoice,
    paid_invoice,
    pay,
    relayer_of,
    reload,
    set_owner_fee,
    settle_all,
    withdrawals_of,
)

pytestmark = pytest.mark.integration


async def test_paid_native_invoice_is_swept_and_completed(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.0125")
    chain, relayer = gateway(services), relayer_of(services)

    sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    assert [row.purpose for row in sent] == [TxPurpose.WITHDRAW]
    assert (await reload(services, invoice.id)).status == "paid"  # not before the receipt
    finished = await settle_all(services)

    assert [row.status for row in finished if row.id == sent[0].id] == [TxStatus.CONFIRMED]
    done = await reload(services, invoice.id)
    assert (done.status, done.withdrawn, done.swept_raw) == ("completed", True, "12500000000000000")
    assert done.withdrawn_at is not None and done.withdrawn_at >= invoice.paid_at  # type: ignore[operator]
    assert await balance_of(evm, owner) == 12_500_000_000_000_000
    assert await balance_of(evm, invoice.payment_address) == 0
    (withdrawal,) = await withdrawals_of(services, invoice.id)
    assert (withdrawal.status, withdrawal.swept_raw, withdrawal.fee_raw) == (
        WithdrawalStatus.COMPLETED,
        "12500000000000000",
        "0",
    )
    # Nothing is left to sweep for this owner.
    assert (
        await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower()) == []
    )


async def test_erc20_batch_splits_fee_to_the_payout_address(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    owner = new_owner()
    payout = new_owner().address
    await set_owner_fee(evm, dev.factory, owner, 250, payout)
    first = await paid_invoice(services, evm, owner.address, "10", dev.token)
    second = await paid_invoice(services, evm, owner.address, "5.5", dev.token)
    chain, relayer = gateway(services), relayer_of(services)

    sent = await plan_withdrawals(
        services, chain, relayer, full=True, owner_key=owner.address.lower()
    )
    await settle_all(services)

    assert len(sent) == 1  # one batch for (owner, TUSD)
    total = 15_500_000
    fee = total * 250 // 10_000
    assert await balance_of(evm, owner.address, dev.token) == total - fee
    assert await balance_of(evm, payout, dev.token) == fee
    for invoice in (first, second):
        done = await reload(services, invoice.id)
        assert (done.status, done.withdrawn) == ("completed", True)
    (withdrawal,) = await withdrawals_of(services, first.id)
    assert (withdrawal.swept_raw, withdrawal.fee_raw) == (str(total), str(fee))


async def test_late_payment_after_completion_is_swept_again(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.001")
    chain, relayer = gateway(services), relayer_of(services)
    await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    await pay(evm, invoice, 7_000_000)
    sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    assert len(sent) == 1
    assert await balance_of(evm, owner) == 10**15 + 7_000_000
    done = await reload(services, invoice.id)
    assert (done.status, done.swept_raw) == ("completed", str(10**15 + 7_000_000))
    assert [w.status for w in await withdrawals_of(services, invoice.id)] == [
        WithdrawalStatus.COMPLETED,
        WithdrawalStatus.COMPLETED,
    ]


async def test_deleted_paid_and_cancelled_escrows_are_swept_pending_ones_are_not(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    owner = new_owner().address
    paid = await paid_invoice(services, evm, owner, "0.002")
    cancelled = await new_invoice(services, owner, "0.5")
    pending = await new_invoice(services, owner, "0.5")
    await pay(evm, cancelled, 3_000)
    await pay(evm, pending, 4_000)
    await recheck_invoice(services, pending)
    now = services.clock.now_ms()
    for gone in (paid, cancelled):
        await delete_invoice(
            services.db, owner.lower(), gone.chain_id, gone.invoice_id, now, services.settings
        )
    chain, relayer = gateway(services), relayer_of(services)

    await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    assert await balance_of(evm, owner) == 2 * 10**15 + 3_000
    assert await balance_of(evm, pending.payment_address) == 4_000  # the payer may still finish
    done = await reload(services, paid.id)
    assert (done.status, done.withdrawn, done.deleted_at) == ("completed", True, now)
    gone = await reload(services, cancelled.id)
    assert (gone.status, gone.withdrawn, gone.swept_raw) == ("cancelled", False, "3000")
    assert (await reload(services, pending.id)).swept_raw == "0"


async def test_expired_partial_is_swept_only_after_the_late_payment_window(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(late_payment_window_s=3600)
    clock = FakeClock(services.clock.now_ms())
    services.clock = clock
    owner = new_owner().address
    invoice = await new_invoice(services, owner, "1")
    await pay(evm, invoice, 5_000)
    clock.advance(services.settings.default_expiry_s * 1000 + 1)
    assert (await recheck_invoice(services, invoice)).status == "expired"
    chain, relayer = gateway(services), relayer_of(services)

    assert (
        await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower()) == []
    )
    clock.advance(3600 * 1000)
    sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    assert len(sent) == 1
    assert await balance_of(evm, owner) == 5_000
    assert (await reload(services, invoice.id)).status == "expired"


async def test_a_full_batch_is_sent_without_waiting_for_the_interval(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(withdrawal_batch_size=3)
    owner = new_owner().address
    chain, relayer = gateway(services), relayer_of(services)
    invoices = [await paid_invoice(services, evm, owner, "0.0001") for _ in range(2)]

    assert (
        await plan_withdrawals(services, chain, relayer, full=False, owner_key=owner.lower()) == []
    )
    invoices.append(await paid_invoice(services, evm, owner, "0.0001"))
    sent = await plan_withdrawals(services, chain, relayer, full=False, owner_key=owner.lower())
    await settle_all(services)

    assert len(sent) == 1
    assert await balance_of(evm, owner) == 3 * 10**14
    for invoice in invoices:
        assert (await reload(services, invoice.id)).status == "completed"


async def test_batches_are_capped_under_the_transaction_gas_limit(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(withdrawal_batch_size=1000)
    assert MAX_ESCROWS_PER_TX * 60_000 + 200_000 <= 16_777_216
    owner = Account.create().address
    invoices = [await paid_invoice(services, evm, owner, "0.00001") for _ in range(5)]
    services.settings.withdrawal_batch_size = 2
    chain, relayer = gateway(services), relayer_of(services)

    sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    finished = await settle_all(services)

    assert len(sent) == 3  # 2 + 2 + 1
    assert all(row.gas <= 16_777_216 for row in sent)
    assert {row.status for row in finished if row.purpose == "withdraw"} == {TxStatus.CONFIRMED}
    assert await balance_of(evm, owner) == 5 * 10**13
    for invoice in invoices:
        assert (await reload(services, invoice.id)).withdrawn


async def test_the_worker_sweeps_paid_invoices_on_its_own(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(settlement_poll_interval_s=0.05, withdrawal_interval_s=3600)
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.0007")
    stop = asyncio.Event()
    task = asyncio.create_task(settlement_worker.run(services, stop))
    try:
        for _ in range(200):
            if (await reload(services, invoice.id)).status == "completed":
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=10)

    assert (await reload(services, invoice.id)).withdrawn
    assert await balance_of(evm, owner) == 7 * 10**14
