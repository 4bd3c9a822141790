"""Sweeps through the service on anvil to owners and payout addresses that are contracts.
Every native send of the factory carries a fixed stipend (``NATIVE_SEND_GAS``): one that burns
gas on receipt (contracts/test/GasBurningRecipient.sol) costs the relayer at most that stipend
(and the credit written for it); the coin it refused is credited to it on the factory
(``nativeCreditOf``) and the invoice completes. An owner that refuses coin and is its own
payout address is credited both the fee and the share of every sweep. A Safe-shaped proxy
wallet (contracts/test/ProxyWallet.sol) receives its coin well within the stipend."""

from __future__ import annotations

import logging

import pytest
from eth_account import Account

from invoicing.chain.abi import event_topic
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.calldata import encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.services import Services
from invoicing.settlement.withdrawals import NATIVE_SEND_GAS, plan_withdrawals, sweep_gas_cap
from invoicing.tables.settlement import RelayerTransaction
from tests.conftest import MakeServices
from tests.support.chain import read_view
from tests.support.factory import (
    deadline_in,
    deploy_test_contract,
    factory_events,
    native_credit,
    send,
)
from tests.support.withdrawals import (
    balance_of,
    gateway,
    paid_invoice,
    parked_of,
    relayer_of,
    reload,
    set_owner_fee,
    settle_all,
)

pytestmark = pytest.mark.integration

# Gas the burner uses on receipt before it accepts the coin: with all the gas left (the
# previous factory version), its sweep would cost the relayer this much more, for any amount.
BURN_GAS = 3_000_000
CAP = sweep_gas_cap(1, native=True)
# What a refused send may cost beyond an accepted one: the stipend, the 2,300 the EVM adds to
# a call with value, and the credit written (a zero-to-nonzero slot and its event).
REFUSED_SEND_GAS = NATIVE_SEND_GAS + 2_300 + 26_000
FUNDER_KEY = DEV_PRIVATE_KEYS[6]


async def sweep(services: Services, owner: str) -> list[RelayerTransaction]:
    """One withdrawal pass for ``owner``'s paid invoices, settled."""
    sent = await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    await settle_all(services)
    return sent


async def gas_used(evm: EvmClient, sent: RelayerTransaction) -> int:
    receipt = await evm.get_receipt(sent.tx_hash)
    assert receipt is not None and receipt["status"] == 1
    assert int(receipt["gasUsed"]) <= sent.gas <= CAP
    return int(receipt["gasUsed"])


async def existing_account(evm: EvmClient) -> str:
    """A fresh EOA that already exists on the chain (holds 1 wei), as a burner contract does:
    paying it costs no new-account charge, so the two sweeps compare like for like."""
    address = Account.create().address
    await send(evm, FUNDER_KEY, address, b"", value=1)
    return address


async def test_an_owner_that_burns_gas_on_receipt_costs_at_most_the_stipend_and_is_credited(
    make_services: MakeServices,
    evm: EvmClient,
    dev: DevDeployment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = await make_services()
    assert await read_view(evm, dev.factory, PAYMENT_FACTORY, "NATIVE_SEND_GAS") == NATIVE_SEND_GAS
    burner = await deploy_test_contract(evm, "GasBurningRecipient", ("uint256", BURN_GAS))
    accepting = await existing_account(evm)
    burning_invoice = await paid_invoice(services, evm, burner, "0.001")
    accepting_invoice = await paid_invoice(services, evm, accepting, "0.001")
    relayer = relayer_of(services)
    nonce = await evm.get_transaction_count(relayer.address)

    with caplog.at_level(logging.WARNING, logger="invoicing.settlement.swept"):
        (burnt,) = await sweep(services, burner)
    (accepted,) = await sweep(services, accepting)

    assert await evm.get_transaction_count(relayer.address) == nonce + 2
    assert await gas_used(evm, burnt) <= await gas_used(evm, accepted) + REFUSED_SEND_GAS
    receipt = await evm.get_receipt(burnt.tx_hash)
    assert receipt is not None
    assert factory_events(receipt, "NativeCredited") == [(burner, 10**15)]
    assert await native_credit(evm, dev.factory, burner) == 10**15
    assert (
        f"chain {dev.chain_id}: {burner} refused {10**15} wei of native coin; factory "
        f"{dev.factory} holds it for it"
    ) in caplog.text
    assert await parked_of(services, burner) == []
    assert (await reload(services, burning_invoice.id)).status == "completed"
    assert (await reload(services, accepting_invoice.id)).status == "completed"
    assert await balance_of(evm, burning_invoice.payment_address) == 0
    assert await balance_of(evm, burner) == 0
    assert await balance_of(evm, accepting) == 10**15 + 1


async def test_a_payout_address_that_burns_gas_on_receipt_is_credited_its_fee(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    owner = Account.create()
    payout = await deploy_test_contract(evm, "GasBurningRecipient", ("uint256", BURN_GAS))
    await set_owner_fee(evm, dev.factory, owner, 500, payout)
    native = await paid_invoice(services, evm, owner.address, "0.001")
    tusd = await paid_invoice(services, evm, owner.address, "5", dev.token)

    sent = await sweep(services, owner.address)

    # Both sweeps go through; the payout's native fee waits for it on the factory.
    assert len(sent) == 2
    for each in sent:
        await gas_used(evm, each)
    assert (await reload(services, native.id)).status == "completed"
    assert (await reload(services, tusd.id)).status == "completed"
    assert await balance_of(evm, owner.address, dev.token) == 4_750_000
    assert await balance_of(evm, payout, dev.token) == 250_000
    assert await balance_of(evm, owner.address) == 95 * 10**13
    assert await native_credit(evm, dev.factory, payout) == 5 * 10**13
    assert await balance_of(evm, payout) == 0
    assert await parked_of(services, owner.address) == []


async def test_an_owner_that_refuses_coin_and_is_its_own_payout_is_credited_every_wei(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    # A wallet with no receive function (it refuses coin) that takes any signature.
    wallet = await deploy_test_contract(evm, "GasBurnerWallet")
    deadline = await deadline_in(evm, 600)
    for data in (
        encode_set_fee_meta(wallet, 500, 0, deadline, bytes(65)),
        encode_set_payout_meta(wallet, wallet, 1, deadline, bytes(65)),
    ):
        await send(evm, FUNDER_KEY, dev.factory, data)
    held = await balance_of(evm, dev.factory)

    # The second sweep finds the first one's credit: the fee it credits must stay beside it.
    for amount in ("0.001", "0.002"):
        invoice = await paid_invoice(services, evm, wallet, amount)
        (sent,) = await sweep(services, wallet)
        await gas_used(evm, sent)
        assert (await reload(services, invoice.id)).status == "completed"

    assert await native_credit(evm, dev.factory, wallet) == 3 * 10**15
    assert await balance_of(evm, dev.factory) - held == 3 * 10**15
    assert await balance_of(evm, wallet) == 0
    assert await parked_of(services, wallet) == []


async def test_a_safe_shaped_proxy_wallet_receives_its_coin_within_the_bound(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services()
    singleton = await deploy_test_contract(evm, "ProxyWalletSingleton")
    wallet = await deploy_test_contract(evm, "ProxyWallet", ("address", singleton))
    invoice = await paid_invoice(services, evm, wallet, "0.001")

    (sent,) = await sweep(services, wallet)

    await gas_used(evm, sent)
    receipt = await evm.get_receipt(sent.tx_hash)
    assert receipt is not None
    safe_received = "0x" + event_topic("ProxyWalletSingleton", "SafeReceived").hex()
    received = [
        (log["topics"][1][-40:], int(log["data"], 16))
        for log in receipt["logs"]
        if log["address"].lower() == wallet.lower() and log["topics"][0] == safe_received
    ]
    assert received == [(dev.factory[2:].lower(), 10**15)]  # SafeReceived(factory, amount)
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, wallet) == 10**15


async def test_a_safe_shaped_proxy_wallet_needs_a_fraction_of_the_stipend(evm: EvmClient) -> None:
    """What receiving coin costs the wallet itself: a plain transfer's estimate less the
    transfer's 21,000, on an existing wallet (cold, as the factory's send finds it)."""
    singleton = await deploy_test_contract(evm, "ProxyWalletSingleton")
    wallet = await deploy_test_contract(evm, "ProxyWallet", ("address", singleton))

    payer = Account.from_key(FUNDER_KEY).address
    transfer = {"from": payer, "to": wallet, "value": hex(10**15)}
    estimate = await evm.call_rpc("eth_estimateGas", [transfer])
    needed = int(estimate, 16) - 21_000

    assert 2_000 < needed < NATIVE_SEND_GAS // 4, needed
