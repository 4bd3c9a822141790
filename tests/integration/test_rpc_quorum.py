"""Two URLs of one chain, one of them lagging or lying, on anvil behind the fault-injecting
proxy: a lagging URL holds neither the payments nor the reads back, and a lying URL decides
nothing alone: not the head read at, not a failed refund or sweep, not a taken nonce, not a
contract wallet's signature, not the chain id /readyz reports."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.errors import ChainUnavailable
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.refunds import RefundStatus
from invoicing.tables.settlement import TxStatus, WithdrawalStatus
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.refunds import REFUND, expire, refund_body, refund_rows
from tests.support.rpc_failover import STUCK_S, detect, services_over
from tests.support.rpc_faults import FaultyRpc, faulty_rpc
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    new_invoice,
    paid_invoice,
    pay,
    relayer_of,
    reload,
    settle_all,
    withdrawals_of,
)

pytestmark = pytest.mark.integration

LAG_BLOCKS = 30  # well past the lead and the pace a second allows


@pytest.fixture
async def honest(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as proxy:
        yield proxy


@pytest.fixture
async def liar(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as proxy:
        proxy.fault = "lie"
        yield proxy


@pytest.fixture
async def laggard(anvil: AnvilProcess, evm: EvmClient) -> AsyncIterator[FaultyRpc]:
    while await evm.block_number() <= LAG_BLOCKS:
        await evm.call_rpc("evm_mine")
    async with faulty_rpc(anvil.url) as proxy:
        proxy.fault, proxy.lag = "lag", LAG_BLOCKS
        yield proxy


async def test_a_second_url_keeping_pace_behind_does_not_hold_a_payment_back(
    make_services: MakeServices, honest: FaultyRpc, laggard: FaultyRpc, evm: EvmClient
) -> None:
    """The second URL keeps the chain's pace 30 blocks behind, its head block older than
    INVOICING_RPC_HEAD_STALE_S: it lags, leaves the quorum, and the payment is seen at once
    at the honest head."""
    services = await services_over(make_services, honest.url, laggard.url, **STUCK_S)
    chain = gateway(services)
    await chain.block_number()
    invoice = await new_invoice(services, new_owner().address, "0.002")

    started = time.monotonic()
    await pay(evm, invoice, int(invoice.required_raw))
    await detect(services)

    assert (await reload(services, invoice.id)).status == "paid"
    assert time.monotonic() - started < 5
    assert chain.highest_block == await evm.block_number()
    assert laggard.methods["eth_call"] == 0  # no read went to the lagging URL


async def test_a_head_one_url_reports_past_the_lead_is_not_read_at(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    """The preferred URL reports the honest head plus 16 (the old fixed lead): with one
    confirmation the lead is one block, so reads stay at the head the honest URL reports,
    where the payment shows."""
    liar.head_lead = 16
    services = await services_over(make_services, liar.url, honest.url)
    chain = gateway(services)
    invoice = await new_invoice(services, new_owner().address, "0.002")
    await pay(evm, invoice, int(invoice.required_raw))

    await detect(services)

    assert chain.highest_block == await evm.block_number()
    assert (await reload(services, invoice.id)).status == "paid"


async def test_a_forged_failed_receipt_does_not_fail_a_mined_refund(
    make_services: MakeServices,
    honest: FaultyRpc,
    liar: FaultyRpc,
    evm: EvmClient,
    dev: DevDeployment,
) -> None:
    """The preferred URL reports every receipt as failed: a refund finalized as failed would
    have the owner sign it again and pay twice. The honest URL's receipt, its block held by
    the other URL, confirms it."""
    liar.fail_receipts = True
    services = await services_over(make_services, liar.url, honest.url)
    owner, payer = new_owner(), new_owner().address
    api_key = await issue_api_key(services, owner)
    invoice = await new_invoice(services, owner.address, "0.01")
    await pay(evm, invoice, 4 * 10**15)
    invoice = await expire(services, invoice)
    body = await refund_body(evm, dev, owner, invoice, payer, 4 * 10**15)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        answer = await http.post(REFUND, json=body, headers=key_headers(api_key))
    assert answer.status_code == 202, answer.text

    await settle_all(services, timeout_s=60)

    assert [r.status for r in await refund_rows(services, invoice.id)] == [RefundStatus.CONFIRMED]
    assert await balance_of(evm, payer) == 4 * 10**15
    assert liar.methods["eth_getTransactionReceipt"] > 0  # it was asked, and forged


async def test_a_forged_failed_receipt_does_not_park_a_mined_sweep(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    liar.fail_receipts = True
    services = await services_over(make_services, liar.url, honest.url)
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.003")

    (sweep,) = await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    finished = await settle_all(services, timeout_s=60)

    assert [(r.id, r.status) for r in finished if r.id == sweep.id] == [
        (sweep.id, TxStatus.CONFIRMED)
    ]
    assert [w.status for w in await withdrawals_of(services, invoice.id)] == [
        WithdrawalStatus.COMPLETED
    ]


async def test_a_url_alone_while_the_other_rests_cannot_declare_a_nonce_taken(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc
) -> None:
    """The honest URL failed three times and rests; the liar reports the relayer's nonce
    mined and hides receipts: the resting URL is asked too, and the nonce is not taken."""
    services = await services_over(make_services, liar.url, honest.url)
    chain, relayer = gateway(services), relayer_of(services)
    nonce = await chain.transaction_count(relayer.address, "latest")
    honest.fault = "drop"
    for _ in range(3):
        await chain.native_balance(relayer.address)  # the liar answers; the other fails
    honest.fault, liar.count_lead, liar.hide_receipts = None, 5, True

    head = await chain.block_number()
    use = await chain.nonce_use(relayer.address, nonce, ["0x" + "ab" * 32], head)

    assert use.taken is False and use.receipt is None
    assert honest.methods["eth_getTransactionCount"] >= 2  # asked while resting


async def test_a_contract_wallet_signature_needs_two_urls(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, dev: DevDeployment
) -> None:
    """The preferred URL answers the EIP-1271 magic value for any signature at a contract
    (the factory, which has no isValidSignature): "no", since the other URL says so; with
    the other URL down it is unconfirmed, never "yes"."""
    liar.signature_ok = True
    services = await services_over(make_services, liar.url, honest.url)
    chain = gateway(services)

    assert await chain.is_valid_signature(dev.factory, bytes(32), b"\x01" * 65, 500_000) is False
    honest.fault = "drop"
    with pytest.raises(ChainUnavailable):
        await chain.is_valid_signature(dev.factory, bytes(32), b"\x01" * 65, 500_000)


async def test_readyz_checks_the_chain_id_of_every_url(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, dev: DevDeployment
) -> None:
    liar.chain_id = 1
    # Time for both URLs to answer on a loaded machine (the 0.5 s of the failover tests once
    # left neither answered: chain_unavailable).
    services = await services_over(make_services, honest.url, liar.url, rpc_timeout_s=5.0)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        answer = await http.get("/readyz")

    assert answer.status_code == 503
    assert (
        answer.json()["checks"][f"chain:{dev.chain_id}"] == "error: wrong_chain_id (node reports 1)"
    )
