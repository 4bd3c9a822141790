"""Refunds the service signs as the owner's refund delegate (POST /integration/invoices/refund),
on anvil over real HTTP: refused until the owner names the service's key, then a share of
the price refunded on chain to the payer of record, bounded by what the escrow holds; every
refusal has its code and sends nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.records import run_records_step
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.refunds import refund_rows, set_delegate
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    PAYER_KEY,
    balance_of,
    gateway,
    pay,
    relayer_tx_count,
    reload,
    settle_all,
    sign_typed,
)

pytestmark = pytest.mark.integration

ROUTE = "/integration/invoices/refund"
PRICE = 10**16  # "0.01" of the native coin
SERVICE_KEY = DEV_PRIVATE_KEYS[9]
SERVICE_DELEGATE = Account.from_key(SERVICE_KEY).address
PAYER = Account.from_key(PAYER_KEY).address


@pytest.fixture
async def shop_app(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    """The API of a service that holds a refund delegate key."""
    services = await make_services(refund_delegate_key=SERVICE_KEY)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def paid_manual_invoice(app: RunningApp, evm: EvmClient, owner: str, api_key: str) -> Invoice:
    """A manual-capture invoice of 0.01 paid by PAYER, seen paid, its payment recorded."""
    answer = await app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner, "chainId": gateway(app.services).config.chain_id,
              "amount": "0.01", "capture": "manual"},
        headers=key_headers(api_key),
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    invoice = await reload(app.services, answer.json()["id"])
    await pay(evm, invoice, PRICE)
    shown = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner, "paymentAddress": invoice.payment_address},
        headers=key_headers(api_key),
    )
    assert shown.json()["invoice"]["status"] == "paid", shown.text
    return invoice


async def record_payments(app: RunningApp, evm: EvmClient) -> None:
    chain = gateway(app.services)
    await run_records_step(app.services, chain, await evm.block_number())


async def ask(app: RunningApp, api_key: str, body: dict[str, Any]) -> httpx.Response:
    return await app.http.post(ROUTE, json=body, headers=key_headers(api_key))


async def test_the_service_refunds_the_payer_of_record_once_named(
    shop_app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    app, owner = shop_app, new_owner()
    api_key = await issue_api_key(app.services, owner)
    invoice = await paid_manual_invoice(app, evm, owner.address, api_key)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id,
            "paymentAddress": invoice.payment_address, "amount": "0.004"}  # fmt: skip
    sent_before = await relayer_tx_count(app.services)

    unnamed = await ask(app, api_key, body)
    assert unnamed.status_code == 409, unnamed.text
    assert unnamed.json()["error"]["code"] == "refund_delegate_not_named"
    assert unnamed.json()["error"]["details"] == {"delegate": SERVICE_DELEGATE, "named": None}
    assert await relayer_tx_count(app.services) == sent_before

    await set_delegate(app, evm, dev, owner, api_key, SERVICE_DELEGATE, nonce=0)
    await record_payments(app, evm)
    payer_before = await balance_of(evm, PAYER)
    answer = await ask(app, api_key, body)

    assert answer.status_code == 202, answer.text
    submitted = answer.json()
    assert (submitted["to"], submitted["amountRaw"], submitted["nonce"]) == (
        PAYER,
        str(4 * 10**15),
        "1",
    )
    assert submitted["ownerAddress"] == owner.address
    await settle_all(app.services)
    assert await balance_of(evm, PAYER) == payer_before + 4 * 10**15
    # A native refund pays the rest to the owner, as a sweep would (the factory's rule).
    assert await balance_of(evm, invoice.payment_address) == 0
    assert await balance_of(evm, owner.address) == PRICE - 4 * 10**15
    (row,) = await refund_rows(app.services, invoice.id)
    assert (row.status, row.to_address, row.amount_raw) == ("confirmed", PAYER, str(4 * 10**15))

    # More than the escrow still holds (nothing now): refused by the refund path, nothing sent.
    sent_before = await relayer_tx_count(app.services)
    too_much = await ask(app, api_key, {**body, "amount": None, "amountRaw": str(PRICE)})
    assert (too_much.status_code, too_much.json()["error"]["code"]) == (
        400,
        "insufficient_balance",
    )
    assert await relayer_tx_count(app.services) == sent_before


async def test_refusals_have_their_codes_and_send_nothing(
    shop_app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    app, owner = shop_app, new_owner()
    api_key = await issue_api_key(app.services, owner)
    invoice = await paid_manual_invoice(app, evm, owner.address, api_key)
    await set_delegate(app, evm, dev, owner, api_key, SERVICE_DELEGATE, nonce=0)
    base = {"ownerAddress": owner.address, "chainId": dev.chain_id,
            "paymentAddress": invoice.payment_address}  # fmt: skip
    sent_before = await relayer_tx_count(app.services)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({}, 400, "invalid_request"),  # neither amount nor amountRaw
        ({"amount": "0.001", "amountRaw": "1000"}, 400, "invalid_request"),
        ({"amount": "-1"}, 400, "invalid_request"),
        ({"amount": "1e-3"}, 400, "invalid_request"),
        ({"amount": "0"}, 400, "invalid_request"),
        ({"amountRaw": "0"}, 400, "invalid_request"),
        ({"amountRaw": 5}, 400, "invalid_request"),  # a number, not a decimal string
        ({"amount": "0.0000000000000000001"}, 400, "invalid_request"),  # 19 decimals
        ({"amount": "0.001", "to": PAYER}, 400, "invalid_request"),  # no choosing whom
        ({"amount": "0.001", "chainId": 999}, 400, "unsupported_chain"),
        ({"amount": "0.001", "paymentAddress": new_owner().address}, 404, "not_found"),
    ]
    for extra, status, code in cases:
        answer = await ask(app, api_key, {**base, **extra})
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), extra
    # The payment is not recorded yet: who to pay back is unknown.
    unrecorded = await ask(app, api_key, {**base, "amount": "0.001"})
    assert (unrecorded.status_code, unrecorded.json()["error"]["code"]) == (
        409,
        "no_payer_of_record",
    )
    # Someone else's API key cannot refund this owner's escrow.
    stranger = new_owner()
    stranger_key = await issue_api_key(app.services, stranger)
    theirs = await ask(app, stranger_key, {**base, "amount": "0.001"})
    assert theirs.status_code == 403, theirs.text
    assert await relayer_tx_count(app.services) == sent_before
    assert await balance_of(evm, invoice.payment_address) == PRICE


async def test_a_service_without_a_delegate_key_refuses(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner()
    api_key = await issue_api_key(app.services, owner)
    invoice = await paid_manual_invoice(app, evm, owner.address, api_key)
    answer = await ask(app, api_key, {"ownerAddress": owner.address, "chainId": dev.chain_id,
                                      "paymentAddress": invoice.payment_address,
                                      "amount": "0.001"})  # fmt: skip
    assert (answer.status_code, answer.json()["error"]["code"]) == (
        409,
        "refund_delegate_not_named",
    )
    assert await balance_of(evm, invoice.payment_address) == PRICE


async def sign_in_dashboard(app: RunningApp, owner: LocalAccount, chain_id: int) -> str:
    """Signs the app's own client in as ``owner``; returns its CSRF token."""
    assert (await sign_in(app.http, owner, chain_id)).status_code == 200
    return csrf_of((await app.http.get("/dashboard")).text)


async def sign_delegate_choice(
    app: RunningApp, owner: LocalAccount, csrf: str, chain_id: int, choice: str
) -> httpx.Response:
    """What the settings form does: prepare, sign in the wallet, submit."""
    headers = {"x-csrf-token": csrf}
    fields = {"chainId": str(chain_id), "choice": choice}
    prepared = await app.http.post(
        "/dashboard/settings/refund-delegate/prepare", json=fields, headers=headers
    )
    assert prepared.status_code == 200, prepared.text
    answer = prepared.json()
    signature = "0x" + sign_typed(owner, answer["typedData"]).hex()
    return await app.http.post(
        "/dashboard/settings/refund-delegate",
        json={**answer["submit"], "signature": signature},
        headers=headers,
    )


async def test_the_owner_names_and_revokes_the_services_delegate_in_the_dashboard(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    owner = new_owner()
    async with dashboard_app(make_services, refund_delegate_key=SERVICE_KEY) as app:
        api_key = await issue_api_key(app.services, owner)
        invoice = await paid_manual_invoice(app, evm, owner.address, api_key)
        await record_payments(app, evm)
        csrf = await sign_in_dashboard(app, owner, dev.chain_id)
        page = (await app.http.get("/dashboard/settings")).text
        assert SERVICE_DELEGATE in page
        assert f"(chain {dev.chain_id}): not named" in page
        assert 'name="choice" value="name"' in page

        named = await sign_delegate_choice(app, owner, csrf, dev.chain_id, "name")
        assert named.status_code == 202, named.text
        await settle_all(app.services)
        page = (await app.http.get("/dashboard/settings")).text
        assert f"(chain {dev.chain_id}): named: your shop can refund" in page
        body = {"ownerAddress": owner.address, "chainId": dev.chain_id,
                "paymentAddress": invoice.payment_address, "amountRaw": "1000"}  # fmt: skip
        refunded = await ask(app, api_key, body)
        assert refunded.status_code == 202, refunded.text
        await settle_all(app.services)

        revoked = await sign_delegate_choice(app, owner, csrf, dev.chain_id, "revoke")
        assert revoked.status_code == 202, revoked.text
        await settle_all(app.services)
        refused = await ask(app, api_key, body)
        odd = await app.http.post(
            "/dashboard/settings/refund-delegate/prepare",
            json={"chainId": str(dev.chain_id), "choice": "someone"},
            headers={"x-csrf-token": csrf},
        )
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        409,
        "refund_delegate_not_named",
    )
    assert refused.json()["error"]["details"]["named"] is None
    assert odd.status_code == 400, odd.text
    (row,) = await refund_rows(app.services, invoice.id)
    assert (row.status, row.to_address, row.amount_raw) == ("confirmed", PAYER, "1000")
