"""Providers that lie or lag, on anvil behind a hostile JSON-RPC proxy: a head that only one
URL reports, a transaction count it over-reports, receipts it hides, a chain id of another
chain, and URLs that carry a provider's key. None of it is believed, and no key shows."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.checks import ChainCheckFailed, verify_chains
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.chain.rpc import JsonRpc
from invoicing.errors import ChainUnavailable
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.refunds import RefundStatus
from invoicing.tables.settlement import TxStatus, WithdrawalStatus
from invoicing.web.app import create_app
from tests.conftest import MakeServices, chain_config
from tests.support.api import issue_api_key, key_headers
from tests.support.log_capture import captured  # noqa: F401 - a fixture
from tests.support.refunds import REFUND, expire, refund_body, refund_rows
from tests.support.rpc_failover import FAST_POLICY, detect, services_over
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

PROVIDER_KEY = "pk-4f1c9a77e0b2d3"  # a made-up key in a URL's path


@pytest.fixture
async def liar(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as proxy:
        proxy.fault = "lie"
        yield proxy


@pytest.fixture
async def honest(anvil: AnvilProcess) -> AsyncIterator[FaultyRpc]:
    async with faulty_rpc(anvil.url) as proxy:
        yield proxy


async def test_a_head_only_one_url_reports_is_not_latched_nor_preferred(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    """The second URL reports a head 1000 blocks ahead: reads stay at the head the first URL
    reports, the paid invoice is detected, and the liar serves no read."""
    liar.head_lead = 1000
    services = await services_over(make_services, honest.url, liar.url)
    invoice = await new_invoice(services, new_owner().address, "0.002")
    await pay(evm, invoice, int(invoice.required_raw))

    await detect(services)

    real_head = await evm.block_number()
    assert gateway(services).highest_block == real_head
    assert (await reload(services, invoice.id)).status == "paid"
    assert set(liar.methods) == {"eth_blockNumber"}  # it answered heads only


async def test_a_lone_head_far_ahead_of_the_chains_pace_is_not_latched(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    """Once a head is believed, the first URL goes down and the liar alone reports a head far
    beyond what the chain can have made since: the believed head stays."""
    services = await services_over(make_services, honest.url, liar.url)
    chain = gateway(services)
    believed = await chain.block_number()
    assert believed == await evm.block_number()

    honest.fault, liar.head_lead = "drop", 1000
    assert await chain.block_number() == believed

    liar.head_lead = 0  # an honest lone answer a block on is believed
    await evm.call_rpc("evm_mine")
    assert await chain.block_number() == believed + 1


async def test_a_url_that_hides_receipts_never_fails_a_mined_sweep(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    """The preferred URL reports the relayer's nonce mined but has no receipt (its backend
    lags): the sweep is confirmed from the other URL, not declared dropped and failed."""
    liar.hide_receipts = True
    services = await services_over(make_services, liar.url, honest.url)
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.003")

    (sweep,) = await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    finished = await settle_all(services, timeout_s=10)

    # Only this test's sweep: another test of the same worker may leave its own rows pending.
    mine = [(row.id, row.status) for row in finished if row.id == sweep.id]
    assert mine == [(sweep.id, TxStatus.CONFIRMED)]
    assert [w.status for w in await withdrawals_of(services, invoice.id)] == [
        WithdrawalStatus.COMPLETED
    ]
    assert (await reload(services, invoice.id)).status == "completed"
    assert liar.methods["eth_getTransactionReceipt"] > 0  # it was asked, and hid it


async def test_a_url_that_hides_receipts_never_fails_a_mined_refund(
    make_services: MakeServices,
    honest: FaultyRpc,
    liar: FaultyRpc,
    evm: EvmClient,
    dev: DevDeployment,
) -> None:
    """A refund marked failed although it was mined would have the owner sign it again and
    pay twice: with the preferred URL hiding its receipt, it is confirmed from the other."""
    liar.hide_receipts = True
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

    await settle_all(services, timeout_s=10)

    assert [r.status for r in await refund_rows(services, invoice.id)] == [RefundStatus.CONFIRMED]
    assert await balance_of(evm, payer) == 4 * 10**15
    assert liar.methods["eth_getTransactionReceipt"] > 0


async def test_an_over_reported_nonce_is_not_the_relayers_next(
    make_services: MakeServices, honest: FaultyRpc, liar: FaultyRpc, evm: EvmClient
) -> None:
    liar.count_lead = 5
    services = await services_over(make_services, liar.url, honest.url)
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.004")
    relayer = relayer_of(services)
    expected = await evm.get_transaction_count(relayer.address, "pending")

    (sweep,) = await plan_withdrawals(
        services, gateway(services), relayer, full=True, owner_key=owner.lower()
    )
    await settle_all(services, timeout_s=10)

    assert sweep.nonce == expected
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 4 * 10**15


async def test_a_backup_url_on_another_chain_refuses_the_start(
    anvil: AnvilProcess, dev: DevDeployment, liar: FaultyRpc
) -> None:
    liar.chain_id = 1
    backup = f"{liar.url}v3/{PROVIDER_KEY}"
    config = chain_config(anvil, dev, rpc_url=anvil.url, rpc_urls=(anvil.url, backup))

    with pytest.raises(ChainCheckFailed) as refused:
        await verify_chains([config], policy=FAST_POLICY)

    redacted = liar.url + "…"
    assert str(refused.value) == (
        f"chain {dev.chain_id} ({config.name}): RPC URL #2 ({redacted}) reports chain id 1, "
        f"configured {dev.chain_id}"
    )
    assert liar.methods["eth_chainId"] == 1

    liar.chain_id = None  # the same backup on the right chain passes
    await verify_chains([config], policy=FAST_POLICY)


async def test_no_repr_log_line_metric_or_error_shows_a_url(
    make_services: MakeServices,
    honest: FaultyRpc,
    liar: FaultyRpc,
    captured: io.StringIO,  # noqa: F811 - the fixture imported above
) -> None:
    """URLs carrying a provider key in the path, the query and the user part: the config's
    and the settings' reprs, the DEBUG log lines (the lines of a set-aside URL and of a head
    not believed among them), the metrics page and the error of an unreachable chain show
    none of it."""
    keyed_honest = f"{honest.url}v2/{PROVIDER_KEY}?apikey={PROVIDER_KEY}"
    keyed_liar = liar.url.replace("http://", f"http://user:{PROVIDER_KEY}@")
    services = await services_over(make_services, keyed_honest, keyed_liar)
    chain = gateway(services)
    liar.head_lead = 1000

    await chain.block_number()
    honest.fault = liar.fault = "drop"
    for _ in range(2):  # eight attempts: each URL fails three times in a row
        with pytest.raises(ChainUnavailable) as unavailable:
            await chain.native_balance(dev_address())
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        metrics = (await http.get("/metrics")).text

    assert "invoicing_rpc_requests_total" in metrics
    shown = [repr(chain.config), repr(services.settings), captured.getvalue(), metrics]
    shown.append(str(unavailable.value))
    assert [PROVIDER_KEY in text for text in shown] == [False] * 5
    events = "\n".join(json.loads(line)["event"] for line in captured.getvalue().splitlines())
    assert f"RPC URL #2 ({liar.url}…) reports head" in events
    assert f"RPC URL #1 ({honest.url}…) set aside" in events


def dev_address() -> str:
    return "0x" + "ab" * 20


async def test_one_url_is_believed_as_it_answers(liar: FaultyRpc, evm: EvmClient) -> None:
    """A chain with one URL has nothing to compare it with: its head is taken as it is."""
    liar.head_lead = 7
    rpc = JsonRpc([liar.url], policy=FAST_POLICY)
    assert await rpc.head() == await evm.block_number() + 7
    await rpc.aclose()
