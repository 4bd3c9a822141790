"""Application metrics read from ``/metrics`` after real actions: invoices created over HTTP,
a payment on anvil found by the monitor, its webhook delivered, its escrow swept; requests
counted by route template; JSON-RPC requests by outcome."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import httpx
import pytest

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.evm import EvmClient
from invoicing.chain.rpc import JsonRpc, RpcPolicy
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications.claims import claim_events
from invoicing.notifications.delivery import AttemptResult, record_results
from invoicing.notifications.worker import client_for
from invoicing.settlement.worker import settlement_step
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.receiver import receiver
from tests.support.scrape import scrape, value
from tests.support.server import free_port, serve
from tests.support.signing import new_owner
from tests.support.withdrawals import gateway, relayer_of, settle_all

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[6]
CREATED = "invoicing_invoices_created_total"
TRANSITIONS = "invoicing_invoice_transitions_total"
DETECTION = "invoicing_payment_detection_seconds"


async def test_created_invoices_are_counted_per_chain(app: RunningApp) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    chain_id = app.services.chains.all()[0].config.chain_id
    before = await scrape(app.http)

    for invoice_id in ("m-1", "m-2"):
        body = {"ownerAddress": owner.address, "chainId": chain_id, "amount": "1"}
        created = await app.http.post(
            "/integration/invoices", json=body | {"invoiceId": invoice_id}, headers=key_headers(key)
        )
        assert created.status_code == 201, created.text
    retry = await app.http.post(
        "/integration/invoices",
        json={
            "ownerAddress": owner.address,
            "chainId": chain_id,
            "amount": "1",
            "invoiceId": "m-2",
        },
        headers=key_headers(key),
    )
    refused = await app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner.address, "chainId": chain_id, "amount": "0"},
        headers=key_headers(key),
    )
    after = await scrape(app.http)

    assert (retry.status_code, refused.status_code) == (200, 400)
    assert value(after, CREATED, chain_id=chain_id) == value(before, CREATED, chain_id=chain_id) + 2
    created_route = {"route": "/integration/invoices", "method": "POST"}
    requests = "invoicing_http_requests_total"
    for status, count in (("201", 2), ("200", 1), ("400", 1)):
        gained = value(after, requests, **created_route, status=status) - value(
            before, requests, **created_route, status=status
        )
        assert gained == count, status


@pytest.fixture
async def own_app(make_services: MakeServices, own_database: str) -> AsyncIterator[RunningApp]:
    """The app on a database of its own: the block pass must find this test's invoice alone,
    not one that an earlier test paid and left for a monitor pass it never ran."""
    services = await make_services(database_url=own_database)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def test_a_payment_on_anvil_is_counted_from_detection_to_sweep(
    own_app: RunningApp, evm: EvmClient
) -> None:
    app = own_app
    services, chain = app.services, gateway(app.services)
    chain_id = chain.config.chain_id
    owner = new_owner()
    key = await issue_api_key(services, owner)
    async with receiver() as hooks:
        created = await app.http.post(
            "/integration/invoices",
            json={
                "ownerAddress": owner.address,
                "chainId": chain_id,
                "amount": "0.001",
                "webhookUrl": hooks.url("/paid"),
            },
            headers=key_headers(key),
        )
        assert created.status_code == 201, created.text
        invoice = created.json()
        before = await scrape(app.http)
        watched_before = value(before, "invoicing_monitor_watched", chain_id=chain_id)

        await evm.transact(PAYER_KEY, invoice["paymentAddress"], value=10**15)
        block = await confirmed_block(chain)
        result = await run_block_pass(services, chain, block, block)
        await run_records_step(services, chain, block)  # as the monitor: releases the webhook
        paid = await scrape(app.http)

        client = client_for(services)
        try:
            claimed = await claim_events(services, services.clock.now_ms(), 1000)
            results = [AttemptResult.of(c, 0, await client.send(c.delivery)) for c in claimed]
            await record_results(services, results)
        finally:
            await client.aclose()
        delivered = await scrape(app.http)
    relayer = relayer_of(services)
    sent = await settlement_step(services, chain, relayer, True, owner_key=owner.address.lower())
    sending = await scrape(app.http)
    await settle_all(services)
    await relayer.read_balance()
    swept = await scrape(app.http)
    relayer_balance = await evm.get_balance(relayer.address)

    assert result.paid == 1 and len(sent) == 1
    # Marked paid: one transition, one detection measured from the paying block.
    paid_to = {"chain_id": chain_id, "to": "paid"}
    assert value(paid, TRANSITIONS, **paid_to) == value(before, TRANSITIONS, **paid_to) + 1
    count = value(paid, f"{DETECTION}_count") - value(before, f"{DETECTION}_count")
    lag_s = value(paid, f"{DETECTION}_sum") - value(before, f"{DETECTION}_sum")
    assert count == 1
    assert 0 <= lag_s < 3600  # anvil's clock is the machine's, unless a test warped it
    assert value(paid, "invoicing_monitor_watched", chain_id=chain_id) == watched_before - 1
    # The webhook: pending until delivered, one successful attempt.
    pending = "invoicing_webhook_pending"
    assert value(paid, pending) == value(before, pending) + 1
    assert value(delivered, pending) == value(before, pending)
    success = {"outcome": "success"}
    attempts = "invoicing_webhook_attempts_total"
    assert value(delivered, attempts, **success) == value(paid, attempts, **success) + 1
    # The sweep: one relayer transaction pending, then confirmed; the invoice completed.
    relayer_pending = "invoicing_relayer_pending_transactions"
    assert value(sending, relayer_pending, chain_id=chain_id) >= 1
    assert value(swept, relayer_pending, chain_id=chain_id) == 0
    done = {"chain_id": chain_id, "to": "completed"}
    assert value(swept, TRANSITIONS, **done) == value(before, TRANSITIONS, **done) + 1
    gas = "invoicing_withdrawal_gas_per_invoice"
    assert value(swept, f"{gas}_count", chain_id=chain_id) == (
        value(before, f"{gas}_count", chain_id=chain_id) + 1
    )
    gas_used = value(swept, f"{gas}_sum", chain_id=chain_id) - value(
        before, f"{gas}_sum", chain_id=chain_id
    )
    assert 21_000 < gas_used < 200_000  # one escrow swept alone
    # Prometheus values are float64: the balance to ~16 significant digits (enough to alert on).
    balance = value(swept, "invoicing_relayer_balance_wei", chain_id=chain_id)
    assert balance == float(relayer_balance)


async def test_requests_are_labelled_by_route_template(app: RunningApp) -> None:
    address = "0x" + "ab" * 20
    before = await scrape(app.http)

    page = await app.http.get(f"/pay/{address}/status")
    nowhere = await app.http.get(f"/no/such/{address}")
    odd = await app.http.request("PROPFIND", "/healthz")
    response = await app.http.get("/metrics")
    after = await scrape(app.http)

    assert (page.status_code, nowhere.status_code, odd.status_code) == (404, 404, 405)
    # A method the client makes up is not a label value of its own.
    odd_labels = {"route": "/healthz", "method": "other", "status": "405"}
    assert value(after, "invoicing_http_requests_total", **odd_labels) == (
        value(before, "invoicing_http_requests_total", **odd_labels) + 1
    )
    assert "PROPFIND" not in response.text
    requests = "invoicing_http_requests_total"
    page_route = {"route": "/pay/{payment_address}/status", "method": "GET", "status": "404"}
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(after, requests, **page_route) == value(before, requests, **page_route) + 1
    assert value(after, requests, **unmatched) == value(before, requests, **unmatched) + 1
    # No label anywhere carries a raw path.
    assert address not in response.text and "/no/such" not in response.text


async def test_rpc_requests_are_counted_by_method_and_outcome(evm: EvmClient) -> None:
    from prometheus_client import REGISTRY

    label = random.randrange(10**9, 2 * 10**9)  # a chain id no other test counts under
    live = JsonRpc(evm.rpc.url, chain_id=label)
    dead = JsonRpc(
        f"http://127.0.0.1:{free_port()}",
        chain_id=label,
        policy=RpcPolicy(max_attempts=2, backoff_s=0.01),
    )
    try:
        await live.call("eth_blockNumber")
        await live.call("eth_chainId")
        await live.call("eth_blockNumber")
        with pytest.raises(ChainUnavailable):
            await dead.call("eth_chainId")
    finally:
        await live.aclose()
        await dead.aclose()

    def count(method: str, outcome: str) -> float | None:
        labels = {"chain_id": str(label), "method": method, "outcome": outcome}
        return REGISTRY.get_sample_value("invoicing_rpc_requests_total", labels)

    assert count("eth_blockNumber", "ok") == 2
    assert count("eth_chainId", "ok") == 1
    assert count("eth_chainId", "connect_error") == 2
    timed = REGISTRY.get_sample_value(
        "invoicing_rpc_request_seconds_count", {"chain_id": str(label), "method": "eth_chainId"}
    )
    assert timed == 3
