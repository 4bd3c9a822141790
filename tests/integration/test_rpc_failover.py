"""Resilient RPC on anvil behind a fault-injecting proxy: the first URL drops connections,
answers 429 or 503, hangs past the timeout or lags behind, and detection, status lookups,
withdrawals and relaying carry on over the second URL."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from invoicing.chain.abi import encode_call
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.checks import verify_chains
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.chain.rpc import JsonRpc, RpcPolicy
from invoicing.errors import ChainUnavailable
from invoicing.fees.service import MetaRequest, submit_meta
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.web.app import create_app
from tests.conftest import MakeServices, chain_config
from tests.support.rpc_failover import FAST_POLICY, STUCK_S, detect, services_over
from tests.support.rpc_faults import FaultyRpc, faulty_rpc
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    new_invoice,
    pay,
    relayer_of,
    reload,
    settle_all,
    sign_typed,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def proxy(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as faulty:
        yield faulty


@pytest.fixture
async def second_proxy(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as faulty:
        yield faulty


async def status_of(services: Services, payment_address: str) -> dict[str, Any]:
    """The public status route, served for real."""
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        answer = await http.get(f"/pay/{payment_address}/status")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.mark.parametrize("fault", ["drop", "429", "503", "delay", "stale"])
async def test_work_carries_on_when_the_first_url_fails(
    fault: str,
    make_services: MakeServices,
    proxy: FaultyRpc,
    anvil: AnvilProcess,
    evm: EvmClient,
    dev: DevDeployment,
) -> None:
    services = await services_over(make_services, proxy.url, anvil.url, **STUCK_S)
    chain = gateway(services)
    owner = new_owner()
    proxy.stale_block = await evm.block_number()
    proxy.fault = fault

    # Detection: the monitor's block pass marks the paid invoice paid.
    detected = await new_invoice(services, owner.address, "0.003")
    await pay(evm, detected, int(detected.required_raw))
    await detect(services)
    assert (await reload(services, detected.id)).status == "paid"

    # Status lookup: the payment page's status route re-checks the chain.
    looked_up = await new_invoice(services, owner.address, "0.002")
    await pay(evm, looked_up, int(looked_up.required_raw))
    status = await status_of(services, looked_up.payment_address)
    assert (status["status"], status["balanceRaw"]) == ("paid", "2000000000000000")

    # Withdrawal: both escrows swept to the owner by the relayer.
    await plan_withdrawals(
        services, chain, relayer_of(services), full=True, owner_key=owner.address.lower()
    )
    await settle_all(services)
    assert await balance_of(evm, owner.address) == 5 * 10**15
    for invoice in (detected, looked_up):
        assert (await reload(services, invoice.id)).status == "completed"

    # Relaying: a gasless SetFee meta-transaction is sent and mined.
    deadline = int(time.time()) + 600
    typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, 250, 0, deadline)
    request = MetaRequest(
        owner.address, dev.chain_id, 0, deadline, "0x" + sign_typed(owner, typed).hex(), 250
    )
    accepted = await submit_meta(services, request)
    await settle_all(services)
    receipt = await evm.get_receipt(accepted.tx_hash)
    assert receipt is not None and receipt["status"] == 1
    assert await chain.fee_settings(owner.address) == (250, None)

    assert proxy.faulted > 0  # the first URL was asked, and failed as told


async def test_a_lagging_url_never_takes_a_reading_back(
    make_services: MakeServices,
    proxy: FaultyRpc,
    second_proxy: FaultyRpc,
    evm: EvmClient,
) -> None:
    """The first URL lags (stale head) while the second is down: the monitor does not read
    at the older block (where the escrow held nothing), so the partly paid invoice keeps its
    balance; once the second URL is back, the pass goes on at the newest block (the stuck URL
    lags: out of the quorum)."""
    services = await services_over(make_services, proxy.url, second_proxy.url, **STUCK_S)
    invoice = await new_invoice(services, new_owner().address, "0.004")
    before_payment = await evm.block_number()
    await pay(evm, invoice, 10**15)
    await detect(services)
    assert (await reload(services, invoice.id)).balance_raw == str(10**15)

    proxy.fault, proxy.stale_block = "stale", before_payment
    second_proxy.fault = "drop"
    newest = gateway(services).highest_block
    assert await gateway(services).block_number() == newest  # not the stale URL's head
    with pytest.raises(ChainUnavailable):
        await detect(services)  # pinned at the newest block: the stale URL lacks it
    assert (await reload(services, invoice.id)).balance_raw == str(10**15)

    second_proxy.fault = None
    await pay(evm, invoice, 3 * 10**15)
    await detect(services)
    paid = await reload(services, invoice.id)
    assert (paid.status, paid.balance_raw) == ("paid", str(4 * 10**15))


async def test_retry_after_is_honoured_up_to_the_cap(proxy: FaultyRpc, dev: DevDeployment) -> None:
    rpc = JsonRpc([proxy.url], policy=FAST_POLICY)
    proxy.fault, proxy.faults_left, proxy.retry_after = "429", 1, "0.4"
    started = time.monotonic()
    assert int(await rpc.call("eth_chainId"), 16) == dev.chain_id
    assert time.monotonic() - started >= 0.4

    capped = JsonRpc([proxy.url], policy=RpcPolicy(backoff_s=0.01, retry_after_max_s=0.2))
    proxy.fault, proxy.faults_left, proxy.retry_after = "429", 1, "3600"
    started = time.monotonic()
    assert int(await capped.call("eth_chainId"), 16) == dev.chain_id
    assert 0.2 <= time.monotonic() - started < 2
    assert proxy.requests == 4
    await rpc.aclose()
    await capped.aclose()


async def test_the_calls_own_errors_are_not_retried(
    proxy: FaultyRpc, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    rpc = JsonRpc([proxy.url, anvil.url], policy=FAST_POLICY)
    # A revert (nonces(owner) of a non-address word) and invalid params: the call's answer.
    bad_call = encode_call(PAYMENT_FACTORY, "nonces", "0x" + "11" * 20)[:4] + b"\xff" * 32
    with pytest.raises(ContractRevert):
        await rpc.call("eth_call", [{"to": dev.factory, "data": "0x" + bad_call.hex()}, "latest"])
    with pytest.raises(RpcError) as invalid:
        await rpc.call("eth_getBalance", ["not an address", "latest"])
    assert not isinstance(invalid.value, ContractRevert)
    assert proxy.requests == 2  # one each, never on the second URL
    await rpc.aclose()


async def test_attempts_are_bounded(proxy: FaultyRpc, second_proxy: FaultyRpc) -> None:
    rpc = JsonRpc([proxy.url, second_proxy.url], policy=FAST_POLICY)
    proxy.fault = second_proxy.fault = "drop"
    with pytest.raises(ChainUnavailable, match=r"unreachable \(4 attempts over 2 URL") as failed:
        await rpc.call("eth_chainId")
    assert proxy.requests + second_proxy.requests == 4
    assert "127.0.0.1" not in str(failed.value)  # a URL may carry a provider's API key
    await rpc.aclose()


async def test_a_failing_url_is_set_aside_then_used_again(
    proxy: FaultyRpc, anvil: AnvilProcess
) -> None:
    policy = RpcPolicy(
        timeout_s=0.5, backoff_s=0.01, backoff_max_s=0.02, failures_before_cooldown=2,
        cooldown_s=0.5,
    )  # fmt: skip
    rpc = JsonRpc([proxy.url, anvil.url], policy=policy)
    proxy.fault = "503"
    for _ in range(4):
        await rpc.call("eth_chainId")
    assert proxy.requests == 2  # set aside after its second failure in a row

    proxy.fault = None
    await rpc.call("eth_chainId")
    assert proxy.requests == 2  # still resting
    time.sleep(0.6)  # noqa: ASYNC251 - nothing else runs; the cool-down is wall time
    await rpc.call("eth_chainId")
    assert proxy.requests == 3  # used again, and first again
    await rpc.aclose()


async def test_the_startup_checks_are_one_batch(
    proxy: FaultyRpc, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    config = chain_config(anvil, dev, rpc_url=proxy.url, rpc_urls=(proxy.url,))
    await verify_chains([config], policy=FAST_POLICY)
    assert proxy.requests == 1
