"""Chains without EIP-1559: the relayer sends type-0 transactions with a gasPrice.

On anvil started with the pre-London Berlin hardfork the service detects it (no
baseFeePerGas in the latest block). The factory cannot run there (the contracts are built for
Cancun), so withdrawals and fee meta-transactions are shown on the usual anvil with the chain
configured ``eip1559 = false``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import SecretStr

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.fees.service import MetaRequest, submit_meta
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.settlement.relayer import Call
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import RelayerTransaction, TxStatus
from tests.conftest import MakeServices
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    paid_invoice,
    relayer_of,
    reload,
    settle_all,
    sign_typed,
)

pytestmark = pytest.mark.integration

BERLIN_CHAIN_ID = 31339


@pytest.fixture(scope="module")
def berlin() -> Iterator[AnvilProcess]:
    with AnvilProcess(chain_id=BERLIN_CHAIN_ID, extra_args=["--hardfork", "berlin"]) as node:
        yield node


@pytest.fixture(scope="module")
async def berlin_evm(berlin: AnvilProcess) -> AsyncIterator[EvmClient]:
    client = EvmClient.connect(berlin.url)
    yield client
    await client.aclose()


@pytest.fixture
async def berlin_services(database_url: str, berlin: AnvilProcess) -> AsyncIterator[Services]:
    # No factory runs there (the contracts are built for Cancun: a Berlin EVM refuses PUSH0
    # and the like), so the relayer sends plain transfers on this chain.
    config = ChainConfig(
        chain_id=BERLIN_CHAIN_ID,
        name="Berlin",
        rpc_url=berlin.url,
        factory="0x" + "00" * 19 + "01",
        relayer_key=SecretStr(DEV_PRIVATE_KEYS[0]),
    )
    built = build_services(
        Settings(
            environment="development",
            database_url=database_url,
            run_workers=False,
            chains=[config],
        )
    )
    yield built
    await built.aclose()


async def transaction_type(evm: EvmClient, tx_hash: str) -> int:
    tx = await evm.call_rpc("eth_getTransactionByHash", [tx_hash])
    return int(tx["type"], 16)


async def test_a_pre_london_chain_is_detected_and_gets_type_0_transactions(
    berlin_services: Services, berlin_evm: EvmClient
) -> None:
    chain = gateway(berlin_services)
    assert chain.config.eip1559 is None  # not configured: detected
    assert await chain.eip1559() is False
    gas_price, tip = await chain.fee_caps()
    assert gas_price == tip == int(await chain.evm.call_rpc("eth_gasPrice"), 16)
    payee = new_owner().address

    relayer = relayer_of(berlin_services)
    call = Call("transfer", payee, b"", 12345)
    row = await relayer.send(call, await relayer.simulate(call))
    (finished,) = await settle_all(berlin_services)
    # A script's transaction (EvmClient.transact) is type 0 as well.
    scripted = await berlin_evm.transact(DEV_PRIVATE_KEYS[1], payee, value=678)

    assert (finished.tx_hash, finished.status) == (row.tx_hash, TxStatus.CONFIRMED)
    assert int(finished.max_fee_per_gas) == int(finished.max_priority_fee_per_gas) == gas_price
    for tx_hash in (row.tx_hash, scripted["transactionHash"]):
        assert await transaction_type(berlin_evm, tx_hash) == 0
    assert scripted["status"] == 1
    assert await berlin_evm.get_balance(payee) == 12345 + 678


async def test_a_withdrawal_and_a_fee_meta_transaction_are_mined_as_type_0(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    """On a chain configured ``eip1559 = false`` (the Cancun anvil, where the factory runs)."""
    services = await make_services(chain={"eip1559": False})
    owner = new_owner()
    invoice = await paid_invoice(services, evm, owner.address, "0.01")
    chain = gateway(services)

    sent = await plan_withdrawals(
        services, chain, relayer_of(services), full=True, owner_key=owner.address.lower()
    )
    deadline = int(time.time()) + 600
    typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, 100, 0, deadline)
    signature = "0x" + sign_typed(owner, typed).hex()
    accepted = await submit_meta(
        services, MetaRequest(owner.address, dev.chain_id, 0, deadline, signature, 100)
    )
    hashes = [row.tx_hash for row in sent] + [accepted.tx_hash]
    # The shared database may hold other tests' relayer transactions: look at ours.
    finished = [row for row in await settle_all(services) if row.tx_hash in hashes]

    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner.address) == 10**16
    assert await chain.fee_settings(owner.address) == (100, None)
    assert sorted(hashes) == sorted(row.tx_hash for row in finished)
    for tx_hash in hashes:
        assert await transaction_type(evm, tx_hash) == 0
        receipt = await evm.get_receipt(tx_hash)
        assert receipt is not None and receipt["status"] == 1
    for row in finished:  # the gas price is recorded as both max fee and tip
        assert isinstance(row, RelayerTransaction)
        assert row.max_fee_per_gas == row.max_priority_fee_per_gas
