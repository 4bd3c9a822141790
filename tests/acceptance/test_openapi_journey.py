"""An integrator's journey over real HTTP, every response checked against openapi.json:
each documented route answers what its schema says, success and errors alike."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from eth_account import Account

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import (
    refund_typed_data,
    set_fee_typed_data,
    set_payout_typed_data,
    set_refund_delegate_typed_data,
)
from invoicing.chain.evm import EvmClient
from invoicing.monitor.records import run_records_step
from invoicing.services import Services
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import key_headers, signed_get, signed_post
from tests.support.factory import sign_typed
from tests.support.gasless import body_for, funded_payer
from tests.support.openapi_check import ResponseChecker, document
from tests.support.refunds import refund_body
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.subscription_payer import cancel_typed_data, permit_for, signed
from tests.support.x402 import payment_header, verify_body

pytestmark = pytest.mark.acceptance

PAYER_KEY = DEV_PRIVATE_KEYS[2]
SERVICE_DELEGATE_KEY = DEV_PRIVATE_KEYS[9]


def successes_documented() -> set[tuple[str, str]]:
    return {
        (f"{method.upper()} {path}", status)
        for path, operations in document()["paths"].items()
        for method, operation in operations.items()
        for status in operation["responses"]
        if status.startswith("2")
    }


async def test_journey_responses_match_the_documented_schemas(
    make_services: MakeServices, dev: DevDeployment, evm: EvmClient
) -> None:
    services = await make_services(
        api_key_issuance_per_hour=2, refund_delegate_key=SERVICE_DELEGATE_KEY
    )
    checker = ResponseChecker()
    owner, stranger = new_owner(), new_owner()
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(
            base_url=base_url, timeout=30, event_hooks={"response": [checker.hook()]}
        ) as http,
    ):
        await journey(http, owner, stranger, dev, evm, services)

    assert checker.problems == []
    # Every documented success was answered and checked (readyz's 503 aside: no chain is down).
    assert successes_documented() - checker.seen == set()
    errors_seen = {status for _route, status in checker.seen if status[0] in "45"}
    assert errors_seen == {"400", "401", "403", "404", "409", "413", "429"}


async def journey(
    http: httpx.AsyncClient,
    owner: Any,
    stranger: Any,
    dev: DevDeployment,
    evm: EvmClient,
    services: Services,
) -> None:
    chain_id, address = dev.chain_id, owner.address
    assert (await http.get("/healthz")).status_code == 200
    assert (await http.get("/readyz")).status_code == 200

    issued = await signed_post(
        http, "/integration/api-keys", owner, "apikey.create", {"ownerAddress": address}
    )
    assert issued.status_code == 201, issued.text
    key = key_headers(issued.json()["apiKey"])
    spare = await signed_post(
        http, "/integration/api-keys", owner, "apikey.create", {"ownerAddress": address}
    )
    over = await signed_post(
        http, "/integration/api-keys", owner, "apikey.create", {"ownerAddress": address}
    )
    assert over.status_code == 429
    keys = await signed_get(
        http, "/integration/api-keys", owner, "apikey.list", {"ownerAddress": address}
    )
    assert len(keys.json()["items"]) == 2
    revoked = await signed_get(
        http,
        "/integration/api-keys",
        owner,
        "apikey.revoke",
        {"ownerAddress": address, "id": spare.json()["id"]},
        method="DELETE",
    )
    assert revoked.status_code == 200

    body = {
        "ownerAddress": address,
        "chainId": chain_id,
        "amount": "0.001",
        "invoiceId": "journey-1",
        "description": "schema journey",
        "metadata": {"order": 1},
    }
    created = await http.post("/integration/invoices", json=body, headers=key)
    assert created.status_code == 201, created.text
    invoice = created.json()
    retried = await http.post("/integration/invoices", json=body, headers=key)
    assert retried.status_code == 200
    conflict = await http.post("/integration/invoices", json={**body, "amount": "2"}, headers=key)
    assert conflict.status_code == 409
    assert (await http.post("/integration/invoices", json=body)).status_code == 401
    stranger_key = await signed_post(
        http, "/integration/api-keys", stranger, "apikey.create", {"ownerAddress": stranger.address}
    )
    forbidden = await http.post(
        "/integration/invoices", json=body, headers=key_headers(stranger_key.json()["apiKey"])
    )
    assert forbidden.status_code == 403
    too_large = await http.post(
        "/integration/invoices", json={**body, "description": "x" * 70_000}, headers=key
    )
    assert too_large.status_code == 413
    bad = await http.post("/integration/invoices", json={**body, "chainId": "1"}, headers=key)
    assert bad.status_code == 400

    payment_address = invoice["paymentAddress"]
    lookup = {"ownerAddress": address, "paymentAddress": payment_address}
    await evm.transact(PAYER_KEY, payment_address, b"", value=10**15)
    paid = await http.get("/integration/invoices/status", params=lookup, headers=key)
    assert paid.json()["invoice"]["status"] == "paid"
    unknown = {**lookup, "paymentAddress": new_owner().address}
    assert (
        await http.get("/integration/invoices/status", params=unknown, headers=key)
    ).status_code == 404
    listed = await http.get(
        "/integration/invoices", params={"ownerAddress": address, "paid": "true"}, headers=key
    )
    assert listed.json()["total"] == 1
    assert (
        await http.get("/integration/invoices/webhooks", params=lookup, headers=key)
    ).status_code == 200
    exported = await http.get(
        "/integration/escrows/export",
        params={"ownerAddress": address, "chainId": chain_id},
        headers=key,
    )
    assert exported.status_code == 200
    assert (await http.get(f"/pay/{payment_address}")).status_code == 200
    assert (await http.get(f"/pay/{payment_address}/status")).status_code == 200
    assert (await http.get("/pay/0x1234/status")).status_code == 400

    await owner_settings(http, owner, key, dev)
    nonce = int((await fees(http, address, chain_id, key))["nonce"])
    deadline = int(time.time()) + 3600
    to = new_owner().address
    typed = refund_typed_data(
        chain_id, dev.factory, address, bytes.fromhex(invoice["salt"][2:]), None, to, 10**14,
        nonce, deadline,
    )  # fmt: skip
    refund = {
        "ownerAddress": address,
        "chainId": chain_id,
        "paymentAddress": payment_address,
        "to": to,
        "amountRaw": str(10**14),
        "tokenAddress": None,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    refunded = await http.post("/integration/invoices/refund-meta", json=refund, headers=key)
    assert refunded.status_code == 202, refunded.text
    shown = await http.get("/integration/invoices/status", params=lookup, headers=key)
    assert [r["amountRaw"] for r in shown.json()["invoice"]["refunds"]] == [str(10**14)]

    await webhook_signing(http, owner, key)
    await events_and_endpoints(http, owner, key)
    await brand(http, address, key)
    # The monitor's step that records the payments behind balances (the report's rows).
    (chain,) = services.chains.all()
    await run_records_step(services, chain, await chain.block_number())
    shown = await http.get("/integration/invoices/status", params=lookup, headers=key)
    assert len(shown.json()["invoice"]["payments"]) == 1
    await back_office(http, address, key, chain_id)
    await team(http, owner)
    await gasless_and_x402(http, address, key, dev, evm)
    await capture_and_delegate(http, owner, key, dev, evm, services)
    await subscriptions(http, address, key, dev, evm)

    params = {"ownerAddress": address, "chainId": str(chain_id), "invoiceId": "journey-1"}
    deleted = await http.delete("/integration/invoices", params=params, headers=key)
    again = await http.delete("/integration/invoices", params=params, headers=key)
    assert deleted.status_code == again.status_code == 200
    assert again.json() == deleted.json()


async def fees(http: httpx.AsyncClient, owner: str, chain_id: int, key: dict[str, str]) -> Any:
    response = await http.get(
        "/integration/fees", params={"ownerAddress": owner, "chainId": chain_id}, headers=key
    )
    assert response.status_code == 200, response.text
    return response.json()


async def owner_settings(
    http: httpx.AsyncClient, owner: Any, key: dict[str, str], dev: DevDeployment
) -> None:
    """SetFee through the integration route, SetPayout through the client-facing one."""
    chain_id, address = dev.chain_id, owner.address
    deadline = int(time.time()) + 3600
    nonce = int((await fees(http, address, chain_id, key))["nonce"])
    typed = set_fee_typed_data(chain_id, dev.factory, address, 250, nonce, deadline)
    fee = {
        "ownerAddress": address,
        "chainId": chain_id,
        "feeBps": 250,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    submitted = await http.post("/integration/fees/set-meta", json=fee, headers=key)
    assert submitted.status_code == 202, submitted.text
    stale = await http.post("/fees/set-meta", json={**fee, "feeBps": 10}, headers={})
    assert stale.status_code in (400, 409), stale.text
    payout = new_owner().address
    typed = set_payout_typed_data(chain_id, dev.factory, address, payout, nonce + 1, deadline)
    payout_body = {
        "ownerAddress": address,
        "chainId": chain_id,
        "payoutAddress": payout,
        "nonce": str(nonce + 1),
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    assert (await http.post("/fees/set-payout-meta", json=payout_body)).status_code == 202
    settings = await fees(http, address, chain_id, key)
    assert settings == {
        "feeBps": 250,
        "payoutAddress": payout,
        "nonce": str(nonce + 2),
        "factory": dev.factory,
    }
    # The other two fee routes, to see their success bodies too.
    nonce += 2
    typed = set_fee_typed_data(chain_id, dev.factory, address, 0, nonce, deadline)
    fee = {
        **fee,
        "feeBps": 0,
        "nonce": str(nonce),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    assert (await http.post("/fees/set-meta", json=fee)).status_code == 202
    typed = set_payout_typed_data(chain_id, dev.factory, address, payout, nonce + 1, deadline)
    payout_body = {
        **payout_body,
        "nonce": str(nonce + 1),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    response = await http.post("/integration/fees/set-payout-meta", json=payout_body, headers=key)
    assert response.status_code == 202, response.text


async def webhook_signing(http: httpx.AsyncClient, owner: Any, key: dict[str, str]) -> None:
    """Signing secrets and owner settings (docs/integration/webhooks.md)."""
    address = owner.address
    created = await http.post(
        "/integration/webhook-secrets", json={"ownerAddress": address}, headers=key
    )
    assert created.status_code == 201, created.text
    listed = await http.get(
        "/integration/webhook-secrets", params={"ownerAddress": address}, headers=key
    )
    assert [item["id"] for item in listed.json()["items"]] == [created.json()["id"]]
    revoked = await http.delete(
        "/integration/webhook-secrets",
        params={"ownerAddress": address, "id": created.json()["id"]},
        headers=key,
    )
    assert revoked.status_code == 200
    changed = await http.put(
        "/integration/settings",
        json={"ownerAddress": address, "webhookApiKeyHeader": False},
        headers=key,
    )
    assert changed.json() == {
        "webhookApiKeyHeader": False,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
    read = await http.get("/integration/settings", params={"ownerAddress": address}, headers=key)
    assert read.json() == {
        "webhookApiKeyHeader": False,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }


async def events_and_endpoints(http: httpx.AsyncClient, owner: Any, key: dict[str, str]) -> None:
    """Webhook endpoints and the event log (docs/integration/webhooks.md): the journey's
    paid invoice has written an ``invoice.paid`` event."""
    address = owner.address
    endpoints = "/integration/webhook-endpoints"
    created = await http.post(
        endpoints,
        json={"ownerAddress": address, "url": "https://hooks.example/journey", "events": ["*"]},
        headers=key,
    )
    assert created.status_code == 201, created.text
    endpoint_id = created.json()["id"]
    listed = await http.get(endpoints, params={"ownerAddress": address}, headers=key)
    assert [item["id"] for item in listed.json()["items"]] == [endpoint_id]
    changed = await http.patch(
        endpoints,
        params={"id": endpoint_id},
        json={"ownerAddress": address, "events": ["invoice.paid"]},
        headers=key,
    )
    assert changed.json()["events"] == ["invoice.paid"]
    pinged = await http.post(
        f"{endpoints}/test", params={"id": endpoint_id}, json={"ownerAddress": address}, headers=key
    )
    assert pinged.status_code == 202, pinged.text
    events = await http.get(
        "/integration/events",
        params={"ownerAddress": address, "type": "invoice.paid"},
        headers=key,
    )
    (paid,) = events.json()["items"]
    one = await http.get(
        f"/integration/events/{paid['id']}", params={"ownerAddress": address}, headers=key
    )
    assert one.json()["event"] == paid
    again = await http.post(
        f"/integration/events/{paid['id']}/redeliver",
        json={"ownerAddress": address, "endpointId": endpoint_id},
        headers=key,
    )
    assert again.status_code == 202, again.text
    removed = await http.delete(
        endpoints, params={"ownerAddress": address, "id": endpoint_id}, headers=key
    )
    assert removed.json() == {"deleted": True, "id": endpoint_id}


async def brand(http: httpx.AsyncClient, address: str, key: dict[str, str]) -> None:
    put = await http.put(
        "/integration/settings/brand",
        json={"ownerAddress": address, "displayName": "Journey shop", "accentColor": "#1a73e8"},
        headers=key,
    )
    assert put.status_code == 200, put.text
    got = await http.get(
        "/integration/settings/brand", params={"ownerAddress": address}, headers=key
    )
    assert got.status_code == 200 and got.json()["displayName"] == "Journey shop"


async def back_office(
    http: httpx.AsyncClient, address: str, key: dict[str, str], chain_id: int
) -> None:
    """Mail settings and the payments report (docs/integration/email.md, reports.md); the
    journey has paid invoices by now."""
    mail = {
        "email": "owner@shop.example",
        "events": ["invoice.paid"],
        "language": "en",
        "receipts": True,
    }
    put = await http.put(
        "/integration/settings/notifications", json={"ownerAddress": address, **mail}, headers=key
    )
    assert put.status_code == 200 and put.json() == mail, put.text
    got = await http.get(
        "/integration/settings/notifications", params={"ownerAddress": address}, headers=key
    )
    assert got.json() == mail
    pending = await http.post(
        "/integration/invoices",
        json={"ownerAddress": address, "chainId": chain_id, "amount": "0.002"},
        headers=key,
    )
    assert pending.status_code == 201, pending.text
    receipt = await http.post(
        f"/pay/{pending.json()['paymentAddress']}/receipt", json={"email": "payer@mail.example"}
    )
    assert receipt.status_code == 200, receipt.text
    window = {"ownerAddress": address, "dateFrom": "0", "dateTo": str(2**53)}
    report = "/integration/reports/payments"
    as_csv = await http.get(report, params=window, headers=key)
    assert as_csv.status_code == 200 and as_csv.text.startswith("invoiceId,"), as_csv.text
    as_json = await http.get(report, params={**window, "format": "json"}, headers=key)
    assert as_json.status_code == 200 and as_json.json()["items"], as_json.text


async def team(http: httpx.AsyncClient, owner: Any) -> None:
    """Team members (docs/integration/members.md): the owner's signature only."""
    address, member = owner.address, new_owner().address
    body = {"ownerAddress": address, "address": member, "role": "viewer"}
    added = await signed_post(http, "/integration/members", owner, "member.add", body)
    assert added.status_code == 201, added.text
    listed = await signed_get(
        http, "/integration/members", owner, "member.list", {"ownerAddress": address}
    )
    assert [m["address"] for m in listed.json()["items"]] == [member]
    removed = await signed_get(
        http,
        "/integration/members",
        owner,
        "member.remove",
        {"ownerAddress": address, "address": member},
        method="DELETE",
    )
    assert removed.json() == {"removed": True, "address": member}


async def gasless_and_x402(
    http: httpx.AsyncClient, address: str, key: dict[str, str], dev: DevDeployment, evm: EvmClient
) -> None:
    """A payer without native coin pays one TUSD invoice through the page's authorization
    route and another through its x402 resource; the owner's facilitator answers."""
    chain = {"ownerAddress": address, "chainId": dev.chain_id}
    opted = await http.post("/integration/gasless", json={**chain, "enabled": True}, headers=key)
    assert opted.status_code == 200, opted.text
    shown = await http.get("/integration/gasless", params=chain, headers=key)
    assert shown.status_code == 200
    payer = await funded_payer(evm, dev, 10_000_000)
    invoices = []
    for n in (1, 2):
        body = {**chain, "amount": "1.5", "tokenAddress": dev.token, "invoiceId": f"gasless-{n}"}
        created = await http.post("/integration/invoices", json=body, headers=key)
        assert created.status_code == 201, created.text
        invoices.append(created.json())
    first, second = (
        SimpleNamespace(payment_address=i["paymentAddress"], required_raw=i["requiredRaw"])
        for i in invoices
    )
    authorization = await body_for(evm, dev, payer, first)  # type: ignore[arg-type]
    relayed = await http.post(f"/pay/{first.payment_address}/authorization", json=authorization)
    assert relayed.status_code == 202, relayed.text
    header = await payment_header(evm, dev, payer, second)
    resource = urlsplit(invoices[1]["x402Url"]).path  # the URL is on the public base URL
    assert resource == f"/pay/{second.payment_address}/x402"
    paid = await http.get(resource, headers={"PAYMENT-SIGNATURE": header})
    assert paid.status_code == 200, paid.text

    supported = await http.get("/x402/facilitator/supported", headers=key)
    assert supported.status_code == 200
    good = await verify_body(evm, dev, payer, address)
    assert (await http.post("/x402/facilitator/verify", json=good, headers=key)).json()[
        "isValid"
    ] is True
    # A settlement to someone else's address: refused in the answer, nothing sent.
    stranger = await verify_body(evm, dev, payer, new_owner().address)
    settled = await http.post("/x402/facilitator/settle", json=stranger, headers=key)
    assert settled.status_code == 200 and settled.json()["success"] is False


async def capture_and_delegate(
    http: httpx.AsyncClient, owner: Any, key: dict[str, str], dev: DevDeployment, evm: EvmClient,
    services: Services,
) -> None:  # fmt: skip
    """Manual capture (docs/integration/invoices.md): one paid invoice captured, another
    voided back to its payer; then the service's refund delegate named, and the captured
    invoice's payer refunded by the service."""
    address = owner.address
    chain = {"ownerAddress": address, "chainId": dev.chain_id}
    held = []
    for n in (1, 2):
        body = {**chain, "amount": "0.01", "capture": "manual", "invoiceId": f"manual-{n}"}
        created = await http.post("/integration/invoices", json=body, headers=key)
        assert created.status_code == 201, created.text
        invoice = created.json()
        await evm.transact(PAYER_KEY, invoice["paymentAddress"], b"", value=10**16)
        params = {"ownerAddress": address, "paymentAddress": invoice["paymentAddress"]}
        shown = await http.get("/integration/invoices/status", params=params, headers=key)
        assert shown.json()["invoice"]["status"] == "paid", shown.text
        held.append(invoice)
    captured = await http.post(
        "/integration/invoices/capture",
        json={**chain, "paymentAddress": held[0]["paymentAddress"]},
        headers=key,
    )
    assert captured.status_code == 200, captured.text
    fees = await http.get("/integration/fees", params=chain, headers=key)
    nonce = int(fees.json()["nonce"])
    second = SimpleNamespace(
        payment_address=held[1]["paymentAddress"], token_address=None, salt=held[1]["salt"]
    )
    body = await refund_body(evm, dev, owner, second, new_owner().address, 10**16, nonce=nonce)  # type: ignore[arg-type]
    voided = await http.post("/integration/invoices/void", json=body, headers=key)
    assert voided.status_code == 202, voided.text
    delegate = Account.from_key(SERVICE_DELEGATE_KEY).address
    deadline_s = int(time.time()) + 3600
    typed = set_refund_delegate_typed_data(
        dev.chain_id, dev.factory, address, delegate, nonce + 1, deadline_s
    )
    named = await http.post(
        "/integration/refund-delegate",
        json={**chain, "delegate": delegate, "nonce": str(nonce + 1),
              "deadline": str(deadline_s), "signature": "0x" + sign_typed(owner.key, typed).hex()},
        headers=key,
    )  # fmt: skip
    assert named.status_code == 202, named.text
    await run_records_step(services, services.chains.get(dev.chain_id), await evm.block_number())
    refunded = await http.post(
        "/integration/invoices/refund",
        json={**chain, "paymentAddress": held[0]["paymentAddress"], "amount": "0.001"},
        headers=key,
    )
    assert refunded.status_code == 202, refunded.text


async def subscriptions(
    http: httpx.AsyncClient, address: str, key: dict[str, str], dev: DevDeployment, evm: EvmClient
) -> None:
    """A subscription (docs/integration/subscriptions.md) created, authorized by a payer who
    approved the contract (period 0 charged at once), read, listed and cancelled."""
    body = {"ownerAddress": address, "chainId": dev.chain_id, "tokenAddress": dev.token,
            "amount": "2.5", "periodSeconds": 3600}  # fmt: skip
    body["subscriptionId"] = "journey-sub"
    created = await http.post("/integration/subscriptions", json=body, headers=key)
    assert created.status_code == 201, created.text
    found = created.json()
    again = await http.post("/integration/subscriptions", json=body, headers=key)
    assert (again.status_code, again.json()["id"]) == (200, found["id"]), again.text
    payer = await funded_payer(evm, dev, 10_000_000)
    await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**18)])
    approve = encode_call(TEST_TOKEN, "approve", found["authorization"]["spender"], 2**256 - 1)
    assert (await evm.transact(payer.key.hex(), dev.token, approve))["status"] == 1
    signature = "0x" + sign_typed(payer.key, found["authorization"]["typedData"]).hex()
    path = f"/subscribe/{found['id']}/authorization"
    authorized = await http.post(path, json={"signature": signature})
    assert authorized.status_code == 200, authorized.text
    query = {"ownerAddress": address, "id": found["id"]}
    status = await http.get("/integration/subscriptions/status", params=query, headers=key)
    assert status.json()["subscription"]["status"] == "active", status.text
    listed = await http.get("/integration/subscriptions", params={"ownerAddress": address},
                            headers=key)  # fmt: skip
    assert listed.status_code == 200, listed.text
    cancelled = await http.delete("/integration/subscriptions", params=query, headers=key)
    assert cancelled.status_code == 200, cancelled.text
    await subscription_by_permit(http, address, key, dev, evm)


async def subscription_by_permit(
    http: httpx.AsyncClient, address: str, key: dict[str, str], dev: DevDeployment, evm: EvmClient
) -> None:
    """A payer with no native coin authorizes with an EIP-2612 permit the relayer carries,
    then cancels by a signed Cancel the relayer carries."""
    body = {"ownerAddress": address, "chainId": dev.chain_id, "tokenAddress": dev.token,
            "amount": "2.5", "periodSeconds": 3600}  # fmt: skip
    created = (await http.post("/integration/subscriptions", json=body, headers=key)).json()
    payer = await funded_payer(evm, dev, 10_000_000)
    typed = created["authorization"]["typedData"]
    deadline = int(time.time()) + 3600
    permit = await permit_for(
        evm, dev, payer.key, payer.address, created["authorization"]["spender"], 2_500_000, deadline
    )
    path = f"/subscribe/{created['id']}"
    authorized = await http.post(
        f"{path}/authorization", json={"signature": signed(payer.key, typed), "permit": permit}
    )
    assert authorized.status_code == 200, authorized.text
    cancel = {"signature": signed(payer.key, cancel_typed_data(typed, payer.address))}
    ended = await http.post(f"{path}/cancellation", json=cancel)
    assert ended.status_code == 200, ended.text
    assert ended.json()["subscription"]["status"] == "cancelled"
