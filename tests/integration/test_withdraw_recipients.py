"""Sweeps through the service on anvil to owners and payout addresses that are contracts.
One that burns gas on receipt (contracts/test/GasBurningRecipient.sol) costs the relayer no
transaction: its sweep would need more gas than a sweep should cost (``sweep_gas_cap``), so
it is parked, and the owner's other sweeps go on. A Safe-shaped proxy wallet
(contracts/test/ProxyWallet.sol) receives its coin within that bound."""

from __future__ import annotations

import re

import pytest
from eth_account import Account

from invoicing.chain.abi import event_topic
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.services import Services
from invoicing.settlement.models import RelayerTransaction
from invoicing.settlement.withdrawals import plan_withdrawals, sweep_gas_cap
from tests.conftest import MakeServices
from tests.integration.test_withdraw_helpers import (
    balance_of,
    gateway,
    paid_invoice,
    parked_of,
    relayer_of,
    reload,
    set_owner_fee,
    settle_all,
)
from tests.support.factory import deploy_test_contract

pytestmark = pytest.mark.integration

# Gas the burner uses on receipt before it accepts the coin: with all the gas left, its sweep
# simulates fine and would cost the relayer this much more, for any amount.
BURN_GAS = 3_000_000
# What an operator reads of such an escrow (`invoicing parked`): the gas its sweep would use
# with the usual headroom, and the bound.
CAP = sweep_gas_cap(1, native=True)
PARKED_REASON = re.compile(rf"needs 3[0-9]{{6}} gas, more than a sweep of it should cost \({CAP}\)")


async def sweep(services: Services, owner: str) -> list[RelayerTransaction]:
    """One withdrawal pass for ``owner``'s paid invoices, settled."""
    sent = await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    await settle_all(services)
    return sent


async def test_an_owner_that_burns_gas_on_receipt_is_parked_without_a_transaction(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    burner = await deploy_test_contract(evm, "GasBurningRecipient", ("uint256", BURN_GAS))
    invoice = await paid_invoice(services, evm, burner, "0.001")
    relayer = relayer_of(services)
    nonce = await evm.get_transaction_count(relayer.address)

    sent = await sweep(services, burner)

    assert sent == []
    assert await evm.get_transaction_count(relayer.address) == nonce  # nothing paid for
    (parked,) = await parked_of(services, burner)
    assert (parked.invoice_id, parked.kind) == (invoice.id, "failing")
    assert PARKED_REASON.fullmatch(parked.reason), parked.reason
    assert (await reload(services, invoice.id)).status == "paid"
    assert await balance_of(evm, invoice.payment_address) == 10**15


async def test_a_payout_address_that_burns_gas_on_receipt_is_parked_without_a_transaction(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    owner = Account.create()
    payout = await deploy_test_contract(evm, "GasBurningRecipient", ("uint256", BURN_GAS))
    await set_owner_fee(evm, dev.factory, owner, 500, payout)
    native = await paid_invoice(services, evm, owner.address, "0.001")
    tusd = await paid_invoice(services, evm, owner.address, "5", dev.token)

    sent = await sweep(services, owner.address)

    # The token sweep moves no native coin: it goes on; the native one is parked.
    assert len(sent) == 1
    assert (await reload(services, tusd.id)).status == "completed"
    assert await balance_of(evm, owner.address, dev.token) == 4_750_000
    (parked,) = await parked_of(services, owner.address)
    assert parked.invoice_id == native.id
    assert PARKED_REASON.fullmatch(parked.reason), parked.reason
    assert await balance_of(evm, native.payment_address) == 10**15


async def test_a_safe_shaped_proxy_wallet_receives_its_coin_within_the_bound(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    singleton = await deploy_test_contract(evm, "ProxyWalletSingleton")
    wallet = await deploy_test_contract(evm, "ProxyWallet", ("address", singleton))
    invoice = await paid_invoice(services, evm, wallet, "0.001")

    (sent,) = await sweep(services, wallet)

    receipt = await evm.get_receipt(sent.tx_hash)
    assert receipt is not None and receipt["status"] == 1
    assert int(receipt["gasUsed"]) <= sent.gas <= CAP
    safe_received = "0x" + event_topic("ProxyWalletSingleton", "SafeReceived").hex()
    received = [
        (log["topics"][1][-40:], int(log["data"], 16))
        for log in receipt["logs"]
        if log["address"].lower() == wallet.lower() and log["topics"][0] == safe_received
    ]
    assert received == [(dev.factory[2:].lower(), 10**15)]  # SafeReceived(factory, amount)
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, wallet) == 10**15
