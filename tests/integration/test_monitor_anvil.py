"""The monitor and webhook workers on a real anvil, a real database and a real HTTP receiver."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.passes import run_due_pass
from invoicing.services import Services
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.monitor_anvil import (
    FAST,
    PAYER_KEY,
    eventually,
    open_invoice,
    pay_native,
    pay_token,
    running_workers,
)
from tests.support.monitoring import events_of, reload
from tests.support.receiver import Receiver
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers

pytestmark = pytest.mark.integration

PAYER = Account.from_key(PAYER_KEY).address


async def _status_of(services: Services, owner: LocalAccount, address: str) -> dict[str, Any]:
    """The invoice as the status lookup answers its owner (API key mode)."""
    headers = key_headers(await issue_api_key(services, owner))
    where = {"ownerAddress": owner.address, "paymentAddress": address}
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        answer = await http.get("/integration/invoices/status", params=where, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["invoice"])


async def test_native_payment_is_detected_and_the_webhook_delivered(
    make_services: MakeServices, evm: EvmClient, hooks: Receiver
) -> None:
    services = await make_services(**FAST)
    owner = new_owner()
    invoice = await open_invoice(services, owner, "0.25", hooks.url("native"))

    async with running_workers(services):
        receipt = await evm.transact(PAYER_KEY, invoice.payment_address, value=25 * 10**16)
        (request,) = await hooks.wait_for("native")
        # Right after the webhook, the status lookup lists the same payments of record.
        status = await _status_of(services, owner, invoice.payment_address)

    paid = await reload(services, invoice)
    (event,) = await events_of(services, invoice)
    assert (paid.status, paid.paid, paid.balance_raw) == ("paid", True, str(25 * 10**16))
    payment = {
        "txHash": receipt["transactionHash"],
        "from": PAYER,
        "amountRaw": str(25 * 10**16),
        "tokenAddress": None,
        "blockNumber": int(receipt["blockNumber"]),
    }
    assert request.body == {
        "ownerAddress": owner.address,
        "chainId": invoice.chain_id,
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "salt": invoice.salt,
        "capture": "automatic",
        "amount": "0.25",
        "tokenAddress": None,
        "status": "paid",
        "paid": True,
        "paidAt": paid.paid_at,
        "requiredRaw": str(25 * 10**16),
        "balanceRaw": str(25 * 10**16),
        "balance": 0.25,
        "updatedAt": paid.updated_at,
        "payments": [payment],
    }
    assert status["payments"] == [payment]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-service-signature"] == "0x" + "ab" * 65
    assert request.headers["x-service-timestamp"] == "17"
    assert request.headers["x-service-event-id"] == event.id
    assert request.headers["x-service-delivery-attempt"] == "1"
    assert (event.status, event.attempts) == ("delivered", 1)


async def test_erc20_partial_payment_then_top_up(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, hooks: Receiver
) -> None:
    services = await make_services(**FAST)
    owner = new_owner()
    invoice = await open_invoice(services, owner, "12.5", hooks.url("erc20"), token=dev.token)

    async with running_workers(services):
        await pay_token(evm, dev.token, invoice.payment_address, 10_000_000)

        async def partial_seen() -> bool:
            return (await reload(services, invoice)).balance_raw == "10000000"

        await eventually(partial_seen, what="the partial payment")
        partial = await reload(services, invoice)
        assert (partial.status, partial.paid) == ("pending", False)
        assert hooks.at("erc20") == []

        await pay_token(evm, dev.token, invoice.payment_address, 2_500_000)
        (request,) = await hooks.wait_for("erc20")
        status = await _status_of(services, owner, invoice.payment_address)

    paid = await reload(services, invoice)
    assert (paid.status, paid.balance_raw, paid.required_raw) == ("paid", "12500000", "12500000")
    assert request.body["tokenAddress"] == dev.token
    assert (request.body["balanceRaw"], request.body["balance"]) == ("12500000", 12.5)
    # Both transfers, the partial one and the top-up, in chain order, as the status lists them.
    payments = request.body["payments"]
    assert [(p["from"], p["amountRaw"], p["tokenAddress"]) for p in payments] == [
        (PAYER, "10000000", dev.token),
        (PAYER, "2500000", dev.token),
    ]
    receipts = [await evm.get_receipt(p["txHash"]) for p in payments]
    assert [int(r["blockNumber"]) for r in receipts if r] == [p["blockNumber"] for p in payments]
    assert status["payments"] == payments


async def test_expired_invoice_is_paid_late_and_the_webhook_fires(
    make_services: MakeServices, evm: EvmClient, hooks: Receiver
) -> None:
    services = await make_services(**FAST)
    invoice = await open_invoice(
        services, new_owner(), "0.01", hooks.url("late"), expires_in_ms=800
    )

    async with running_workers(services):

        async def expired() -> bool:
            return (await reload(services, invoice)).status == "expired"

        await eventually(expired, what="expiry")
        assert hooks.at("late") == []
        await pay_native(evm, invoice.payment_address, 10**16)
        (request,) = await hooks.wait_for("late")

    paid = await reload(services, invoice)
    assert (paid.status, paid.paid) == ("paid", True)
    assert paid.paid_at is not None and paid.paid_at > paid.expires_at
    assert request.body["status"] == "paid"


async def test_retries_until_2xx_with_one_event_id(
    make_services: MakeServices, evm: EvmClient, hooks: Receiver
) -> None:
    services = await make_services(**FAST)
    owner = new_owner()
    invoice = await open_invoice(services, owner, "0.02", hooks.url("flaky"))
    hooks.answers["/flaky"] = [500, 502]

    async with running_workers(services):
        await pay_native(evm, invoice.payment_address, 2 * 10**16)
        requests = await hooks.wait_for("flaky", 3)
        (event,) = await events_of(services, invoice)

        async def delivered() -> bool:
            return (await events_of(services, invoice))[0].status == "delivered"

        await eventually(delivered, what="delivery recorded")

    assert {r.headers["x-service-event-id"] for r in requests} == {event.id}
    assert [r.headers["x-service-delivery-attempt"] for r in requests] == ["1", "2", "3"]
    assert requests[1].at - requests[0].at >= 0.3
    assert len(hooks.at("flaky")) == 3

    app = create_app(services, run_workers_in_process=False)
    query = {"paymentAddress": invoice.payment_address}
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        answer = await http.get(
            "/integration/invoices/webhooks",
            params={"ownerAddress": owner.address, **query},
            headers=signed_headers(owner, "invoice.webhooks", query),
        )
    assert answer.status_code == 200
    body = answer.json()
    assert body["events"] == [
        {
            "eventId": event.id,
            "status": "delivered",
            "attempts": 3,
            "nextAttemptAt": None,
            "createdAt": event.created_at,
            "deliveredAt": body["events"][0]["deliveredAt"],
        }
    ]
    assert [(i["eventId"], i["attempt"], i["statusCode"], i["error"]) for i in body["items"]] == [
        (event.id, 1, 500, None),
        (event.id, 2, 502, None),
        (event.id, 3, 200, None),
    ]
    assert all(isinstance(i["attemptedAt"], int) for i in body["items"])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_ssrf_guard_refuses_loopback_targets(
    make_services: MakeServices, evm: EvmClient, hooks: Receiver, host: str
) -> None:
    services = await make_services(webhook_allow_private=False, **FAST)
    port = hooks.base_url.rsplit(":", 1)[1]
    invoice = await open_invoice(services, new_owner(), "0.01", f"http://{host}:{port}/ssrf")

    async with running_workers(services):
        await pay_native(evm, invoice.payment_address, 10**16)

        async def failed() -> bool:
            events = await events_of(services, invoice)
            return bool(events) and events[0].status == "failed"

        await eventually(failed, what="the refused event")

    (event,) = await events_of(services, invoice)
    assert event.attempts == 1
    assert hooks.at("ssrf") == []
    assert (await reload(services, invoice)).status == "paid"


async def test_a_payment_removed_by_a_reorg_never_marks_the_invoice_paid(
    make_services: MakeServices, evm: EvmClient, hooks: Receiver
) -> None:
    # Interval 0: every pass re-reads the invoice (nothing waits for its next due time).
    services = await make_services(chain={"confirmations": 3}, monitor_interval_s=0)
    chain = services.chains.all()[0]
    invoice = await open_invoice(services, new_owner(), "0.05", hooks.url("reorg"))

    paid_in = await pay_native(evm, invoice.payment_address, 5 * 10**16)
    await evm.call_rpc("anvil_mine", [1])
    seen_at = await run_due_pass(services, chain)
    assert seen_at.checked >= 1
    assert seen_at.block == paid_in - 1  # 2 confirmations so far: below the depth of 3
    assert await evm.get_balance(invoice.payment_address) == 5 * 10**16
    assert (await reload(services, invoice)).balance_raw == "0"

    await evm.call_rpc("anvil_reorg", [2, []])  # the payment's block and the next are replaced
    await evm.call_rpc("anvil_mine", [3])
    after = await run_due_pass(services, chain, await _confirmed(services))

    row = await reload(services, invoice)
    assert after.block >= paid_in and after.checked >= 1
    assert await evm.get_balance(invoice.payment_address) == 0
    assert (row.status, row.paid, row.balance_raw) == ("pending", False, "0")
    assert await events_of(services, invoice) == []

    # The same payment made again, once it has 3 confirmations, does count.
    again = await pay_native(evm, invoice.payment_address, 5 * 10**16)
    await evm.call_rpc("anvil_mine", [2])
    await run_due_pass(services, chain, again)
    row = await reload(services, invoice)
    assert (row.status, row.balance_raw) == ("paid", str(5 * 10**16))
    assert len(await events_of(services, invoice)) == 1


async def _confirmed(services: Services) -> int:
    from invoicing.monitor.check import confirmed_block

    return await confirmed_block(services.chains.all()[0])


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ({"paymentAddress": "0x123"}, 400, "invalid_request"),
        ({}, 400, "invalid_request"),
        ({"paymentAddress": "0x" + "11" * 20, "extra": "1"}, 400, "invalid_request"),
        ({"paymentAddress": "0x" + "11" * 20}, 404, "not_found"),
    ],
)
async def test_webhook_listing_bad_input(
    make_services: MakeServices, query: dict[str, Any], status: int, code: str
) -> None:
    services = await make_services()
    owner = new_owner()
    app = create_app(services, run_workers_in_process=False)
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        answer = await http.get(
            "/integration/invoices/webhooks",
            params={"ownerAddress": owner.address, **query},
            headers=signed_headers(owner, "invoice.webhooks", query),
        )
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code


async def test_webhook_listing_is_private_to_the_owner(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    owner, stranger = new_owner(), new_owner()
    invoice = await open_invoice(services, owner, "1", None)
    query = {"paymentAddress": invoice.payment_address}
    app = create_app(services, run_workers_in_process=False)
    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        unsigned = await http.get(
            "/integration/invoices/webhooks", params={"ownerAddress": owner.address, **query}
        )
        other = await http.get(
            "/integration/invoices/webhooks",
            params={"ownerAddress": stranger.address, **query},
            headers=signed_headers(stranger, "invoice.webhooks", query),
        )
        wrong_action = await http.get(
            "/integration/invoices/webhooks",
            params={"ownerAddress": owner.address, **query},
            headers=signed_headers(owner, "invoice.status", query),
        )
        mine = await http.get(
            "/integration/invoices/webhooks",
            params={"ownerAddress": owner.address, **query},
            headers=signed_headers(owner, "invoice.webhooks", query),
        )
    assert (unsigned.status_code, unsigned.json()["error"]["code"]) == (401, "unauthorized")
    assert (other.status_code, other.json()["error"]["code"]) == (404, "not_found")
    assert (wrong_action.status_code, wrong_action.json()["error"]["code"]) == (401, "unauthorized")
    assert mine.status_code == 200
    assert mine.json() == {"paymentAddress": invoice.payment_address, "events": [], "items": []}
