"""A subscription's charges that fail on anvil: one that passes the simulation and reverts
on chain (the payer moved the balance away in the same block) is tried again within the
grace window like a refused one, then the subscription is past due; the payer pays that
period by hand into its invoice's escrow and the subscription is active again; two failed
periods in a row cancel it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from eth_account import Account

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.payments.subscriptions.periods import charge_due_once
from invoicing.tables.settlement import TxStatus
from tests.conftest import RunningApp
from tests.support.gasless import MINTER_KEY
from tests.support.subscriptions import (
    AMOUNT_RAW,
    PERIOD_S,
    authorized,
    charges_sent,
    event_types,
    later,
    own_chain,
    status_of,
    subscribed,
    token_balance,
)
from tests.support.withdrawals import settle_all

pytestmark = pytest.mark.integration


# A chain of its own (see own_chain).
anvil, evm, dev = own_chain(31_340)


async def outbid(evm: EvmClient, key: str, token: str, to: str, amount: int) -> bytes:
    """A transfer of ``amount`` of ``token`` to ``to`` with a tip far above the relayer's."""
    tx = {
        "type": 2,
        "chainId": await evm.chain_id(),
        "nonce": await evm.get_transaction_count(Account.from_key(key).address),
        "to": token,
        "value": 0,
        "data": encode_call(TEST_TOKEN, "transfer", to, amount),
        "gas": 100_000,
        "maxFeePerGas": 500 * 10**9,
        "maxPriorityFeePerGas": 400 * 10**9,
    }
    return evm.sign_transaction(key, tx)[1]


async def pass_after_retry_delay(services: Any, evm: EvmClient) -> None:
    """The retry delay (1 s of the server's clock) and one period of the chain's, then a
    pass of the worker."""
    await asyncio.sleep(1.1)
    await later(evm, PERIOD_S)
    await charge_due_once(services)


async def test_a_charge_reverted_on_chain_is_retried_then_past_due_paid_by_hand_then_cancelled(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, make_services: Any
) -> None:
    owner, headers, payer, created = await subscribed(app, evm, dev)
    pk = created["id"]
    await authorized(app, payer, created)
    await settle_all(app.services)
    services = await make_services(
        subscription_grace_s=PERIOD_S,
        subscription_retry_s=1,
        subscription_max_failed_periods=2,
    )
    elsewhere = Account.create().address
    await later(evm, PERIOD_S)

    # Period 1: the charge passes the simulation and is sent; the payer then sends all it
    # holds elsewhere with a higher tip, mined first in the same block: the charge reverts.
    held = 10_000_000 - AMOUNT_RAW
    await evm.call_rpc("evm_setAutomine", [False])
    try:
        await charge_due_once(services)
        await evm.send_raw_transaction(
            await outbid(evm, payer.key.hex(), dev.token, elsewhere, held)
        )
        await evm.call_rpc("evm_mine", [])
    finally:
        await evm.call_rpc("evm_setAutomine", [True])
    finished = await settle_all(services)

    assert [row.status for row in finished] == [TxStatus.FAILED]
    assert await token_balance(evm, dev, elsewhere) == held
    view = await status_of(app, owner, headers, pk)
    assert view["status"] == "active"
    assert [c["chargeStatus"] for c in view["charges"]] == ["confirmed", "reverted"]
    assert await charges_sent(app, owner.address) == 2

    await charge_due_once(services)  # tried again at once: refused (balance), nothing sent
    assert (await status_of(app, owner, headers, pk))["status"] == "active"
    await pass_after_retry_delay(services, evm)  # period 1's grace window is over
    view = await status_of(app, owner, headers, pk)
    assert view["status"] == "past_due"
    assert [c["chargeStatus"] for c in view["charges"]] == ["confirmed", "failed"]
    assert await charges_sent(app, owner.address) == 2

    # The payer pays period 1 by hand into its invoice's escrow (as its payment page asks).
    escrow = view["charges"][1]["paymentAddress"]
    mint = encode_call(TEST_TOKEN, "mint", payer.address, AMOUNT_RAW)
    assert (await evm.transact(MINTER_KEY, dev.token, mint))["status"] == 1
    by_hand = encode_call(TEST_TOKEN, "transfer", escrow, AMOUNT_RAW)
    assert (await evm.transact(payer.key.hex(), dev.token, by_hand))["status"] == 1
    paid = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner.address, "paymentAddress": escrow},
        headers=headers,
    )
    assert paid.json()["invoice"]["status"] == "paid"
    assert paid.json()["invoice"]["subscription"] == {"id": pk, "period": 1}
    await charge_due_once(services)  # active again; period 2 refused (balance), retried
    view = await status_of(app, owner, headers, pk)
    assert view["status"] == "active"
    assert view["charges"][1]["status"] == "paid"

    await pass_after_retry_delay(services, evm)  # period 2 failed: past due
    assert (await status_of(app, owner, headers, pk))["status"] == "past_due"
    await charge_due_once(services)  # period 3 refused, retried
    await pass_after_retry_delay(services, evm)  # period 3 failed: two in a row

    view = await status_of(app, owner, headers, pk)
    assert view["status"] == "cancelled"
    assert [c["chargeStatus"] for c in view["charges"]] == [
        "confirmed",
        "failed",
        "failed",
        "failed",
    ]
    assert await charges_sent(app, owner.address) == 2
    assert await token_balance(evm, dev, payer.address) == 0
    assert await token_balance(evm, dev, escrow) == AMOUNT_RAW
    assert await event_types(app, owner.address) == [
        "subscription.activated",
        "subscription.charged",
        "subscription.past_due",
        "subscription.past_due",
        "subscription.cancelled",
    ]
