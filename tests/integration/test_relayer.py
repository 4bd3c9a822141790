"""The relayer on anvil: stuck transactions replaced, restarts, nonces across processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
from eth_account import Account
from pydantic import SecretStr
from sqlalchemy import select

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.evm import EvmClient
from invoicing.clock import FakeClock
from invoicing.settlement.relayer import Call
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import RelayerTransaction, TxStatus, WithdrawalStatus
from tests.conftest import MakeServices
from tests.support.rpc_faults import faulty_rpc
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    paid_invoice,
    relayer_of,
    reload,
    settle_all,
    withdrawals_of,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def manual_mining(evm: EvmClient) -> AsyncIterator[None]:
    """anvil with automine off for the test; pending transactions are mined afterwards."""
    await evm.call_rpc("evm_setAutomine", [False])
    try:
        yield
    finally:
        await evm.call_rpc("evm_setAutomine", [True])
        await evm.call_rpc("evm_mine")


async def row_of(services: object, row_id: str) -> RelayerTransaction:
    async with services.db.sessions() as session:  # type: ignore[attr-defined]
        row = await session.get(RelayerTransaction, row_id)
        assert row is not None
        return row  # type: ignore[no-any-return]


async def test_a_stuck_withdrawal_is_replaced_with_higher_fees(
    make_services: MakeServices, evm: EvmClient, manual_mining: None, own_database: str
) -> None:
    # A database of its own: it tracks every pending relayer transaction it finds, and a test
    # run before it on the same worker may leave its own pending.
    services = await make_services(relayer_resend_after_s=30, database_url=own_database)
    clock = FakeClock(services.clock.now_ms())
    services.clock = clock
    owner = new_owner().address
    await evm.call_rpc("evm_setAutomine", [True])
    invoice = await paid_invoice(services, evm, owner, "0.003")
    await evm.call_rpc("evm_setAutomine", [False])
    chain, relayer = gateway(services), relayer_of(services)
    (sent,) = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())

    # Not mined, not yet overdue: left alone.
    assert await track_pending(services, chain, relayer) == []
    clock.advance(30_000)
    assert await track_pending(services, chain, relayer) == []
    replaced = await row_of(services, sent.id)
    await evm.call_rpc("evm_mine")
    finished = await track_pending(services, chain, relayer)

    assert replaced.hashes == [sent.tx_hash, replaced.tx_hash] and replaced.attempts == 2
    assert int(replaced.max_fee_per_gas) * 10 >= int(sent.max_fee_per_gas) * 11
    assert int(replaced.max_priority_fee_per_gas) * 10 >= int(sent.max_priority_fee_per_gas) * 11
    assert replaced.nonce == sent.nonce
    assert [(row.id, row.status, row.mined_hash) for row in finished] == [
        (sent.id, TxStatus.CONFIRMED, replaced.tx_hash)
    ]
    assert await evm.get_receipt(sent.tx_hash) is None
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 3 * 10**15


async def test_a_restart_between_recording_and_sending_resends_the_recorded_transaction(
    make_services: MakeServices, evm: EvmClient
) -> None:
    crashed = await make_services()
    owner = new_owner().address
    invoice = await paid_invoice(crashed, evm, owner, "0.004")
    relayer = relayer_of(crashed)
    # The process dies after recording the withdrawal, before broadcasting it.
    original = relayer.broadcast
    relayer.broadcast = _never_sent  # type: ignore[method-assign]
    (sent,) = await plan_withdrawals(
        crashed, gateway(crashed), relayer, full=True, owner_key=owner.lower()
    )
    relayer.broadcast = original  # type: ignore[method-assign]
    assert await evm.get_receipt(sent.tx_hash) is None

    restarted = await make_services()
    chain, again = gateway(restarted), relayer_of(restarted)
    # The recorded withdrawal still claims the invoice.
    assert await plan_withdrawals(restarted, chain, again, full=True, owner_key=owner.lower()) == []
    assert (await reload(restarted, invoice.id)).status == "paid"
    await settle_all(restarted)

    assert (await row_of(restarted, sent.id)).status == TxStatus.CONFIRMED
    assert (await reload(restarted, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 4 * 10**15
    assert len(await withdrawals_of(restarted, invoice.id)) == 1


async def _never_sent(_row: RelayerTransaction) -> bool:
    return False


async def test_a_restart_after_sending_confirms_without_sweeping_again(
    make_services: MakeServices, evm: EvmClient, manual_mining: None
) -> None:
    crashed = await make_services()
    owner = new_owner().address
    await evm.call_rpc("evm_setAutomine", [True])
    invoice = await paid_invoice(crashed, evm, owner, "0.005")
    await evm.call_rpc("evm_setAutomine", [False])
    (sent,) = await plan_withdrawals(
        crashed, gateway(crashed), relayer_of(crashed), full=True, owner_key=owner.lower()
    )

    restarted = await make_services()
    chain, again = gateway(restarted), relayer_of(restarted)
    assert await plan_withdrawals(restarted, chain, again, full=True, owner_key=owner.lower()) == []
    assert await track_pending(restarted, chain, again) == []
    assert (await reload(restarted, invoice.id)).status == "paid"  # no receipt yet
    await evm.call_rpc("evm_mine")
    finished = await track_pending(restarted, chain, again)

    assert [(row.id, row.status) for row in finished] == [(sent.id, TxStatus.CONFIRMED)]
    assert (await reload(restarted, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 5 * 10**15


async def test_a_nonce_taken_by_another_sender_drops_the_withdrawal_and_releases_it(
    make_services: MakeServices, evm: EvmClient, own_database: str
) -> None:
    # A database of its own: the tracking follows every pending transaction it finds.
    services = await make_services(database_url=own_database)
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.006")
    chain, relayer = gateway(services), relayer_of(services)
    original = relayer.broadcast
    relayer.broadcast = _never_sent  # type: ignore[method-assign]
    (lost,) = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    relayer.broadcast = original  # type: ignore[method-assign]
    # Someone else uses the relayer key and its nonce before our transaction goes out.
    other = await evm.transact(DEV_PRIVATE_KEYS[0], new_owner().address, value=1)
    assert other["status"] == 1
    # Not dropped while the nonce's taker is the head block (its node may not serve that
    # block's receipts yet): once a block is over it.
    assert await track_pending(services, chain, relayer) == []
    await evm.call_rpc("evm_mine")

    finished = await track_pending(services, chain, relayer)
    assert [(row.id, row.status) for row in finished] == [(lost.id, TxStatus.DROPPED)]
    assert [w.status for w in await withdrawals_of(services, invoice.id)] == [
        WithdrawalStatus.FAILED
    ]
    assert (await reload(services, invoice.id)).status == "paid"
    retry = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
    await settle_all(services)

    assert len(retry) == 1 and retry[0].nonce > lost.nonce
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 6 * 10**15


async def test_a_sweep_mined_in_the_head_block_before_the_node_serves_its_receipt_is_not_dropped(
    make_services: MakeServices, evm: EvmClient, anvil: AnvilProcess, own_database: str
) -> None:
    """The node shows the head block's state (the relayer's nonce used) before it serves
    that block's receipts, as anvil under load does for a moment: the sweep is not taken
    for one whose nonce another transaction used; it confirms once the receipt is there."""
    async with faulty_rpc(anvil.url) as node:
        # A database of its own: the tracking below follows every pending transaction.
        services = await make_services(chain={"rpc_url": node.url}, database_url=own_database)
        owner = new_owner().address
        invoice = await paid_invoice(services, evm, owner, "0.008")
        chain, relayer = gateway(services), relayer_of(services)
        node.fault, node.late_receipts = "lie", True
        (sent,) = await plan_withdrawals(
            services, chain, relayer, full=True, owner_key=owner.lower()
        )
        await evm.wait_for_receipt(sent.tx_hash)  # mined (anvil mines beside the send), at the head

        assert await track_pending(services, chain, relayer) == []
        await evm.call_rpc("evm_mine")
        finished = await settle_all(services)

    assert [(row.id, row.status) for row in finished] == [(sent.id, TxStatus.CONFIRMED)]
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 8 * 10**15


async def test_nonces_are_unique_and_gapless_across_processes(
    make_services: MakeServices, evm: EvmClient, dev: object
) -> None:
    first, second = await make_services(), await make_services()  # separate engines
    relayers = [relayer_of(first), relayer_of(second)]
    target = new_owner().address
    call = Call("set_fee", target, b"")  # a plain transfer-like call to an EOA

    rows = await asyncio.gather(*(relayers[i % 2].send(call, 21_000 + 0) for i in range(10)))
    await settle_all(first)

    nonces = sorted(row.nonce for row in rows)
    assert nonces == list(range(nonces[0], nonces[0] + 10))
    async with first.db.sessions() as session:
        statuses = set(
            await session.scalars(
                select(RelayerTransaction.status).where(
                    RelayerTransaction.id.in_([row.id for row in rows])
                )
            )
        )
    assert statuses == {TxStatus.CONFIRMED}


async def test_after_a_key_rotation_the_old_keys_pending_sweep_is_followed_to_the_end(
    make_services: MakeServices, evm: EvmClient, manual_mining: None, own_database: str
) -> None:
    """The production page's rotation: the workers restart with a new relayer key while a
    sweep sent by the old one is pending. It is followed until final and never re-signed
    (its key is gone); new sweeps go out from the new key."""
    before = await make_services(relayer_resend_after_s=30, database_url=own_database)
    owner = new_owner().address
    await evm.call_rpc("evm_setAutomine", [True])
    first = await paid_invoice(before, evm, owner, "0.007")
    await evm.call_rpc("evm_setAutomine", [False])
    (old,) = await plan_withdrawals(
        before, gateway(before), relayer_of(before), full=True, owner_key=owner.lower()
    )

    new_key = "0x" + os.urandom(32).hex()
    new_address = Account.from_key(new_key).address
    await evm.call_rpc("anvil_setBalance", [new_address, hex(10**18)])
    rotated = await make_services(
        chain={"relayer_key": SecretStr(new_key)},
        relayer_resend_after_s=30,
        database_url=own_database,
    )
    clock = FakeClock(rotated.clock.now_ms() + 60_000)  # long overdue: ours would be replaced
    rotated.clock = clock
    chain, relayer = gateway(rotated), relayer_of(rotated)
    assert relayer.address == new_address != old.sender
    assert await track_pending(rotated, chain, relayer) == []
    assert (await row_of(rotated, old.id)).hashes == [old.tx_hash]  # not re-signed
    await evm.call_rpc("evm_mine")
    finished = await track_pending(rotated, chain, relayer)

    assert [(row.id, row.status, row.mined_hash) for row in finished] == [
        (old.id, TxStatus.CONFIRMED, old.tx_hash)
    ]
    assert (await reload(rotated, first.id)).status == "completed"
    await evm.call_rpc("evm_setAutomine", [True])
    second = await paid_invoice(rotated, evm, owner, "0.001")
    (new,) = await plan_withdrawals(rotated, chain, relayer, full=True, owner_key=owner.lower())
    assert new.sender == new_address
    await settle_all(rotated)
    assert (await reload(rotated, second.id)).status == "completed"
    assert await balance_of(evm, owner) == 8 * 10**15
