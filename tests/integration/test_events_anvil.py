"""Every invoice event on anvil with real payments, delivered by the real webhook worker to a
real receiver: partial, over- and late payment, expiry, delete, sweep and refund. Each
delivery's signature is checked with this file's own HMAC code; the paid webhook to
the invoice's webhookUrl stays as it was (same payload and headers) and can be redelivered.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import select, update

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.records import run_records_step
from invoicing.notifications.worker import Dispatcher, client_for
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventStatus, WebhookEvent
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.receiver import Received, Receiver, receiver
from tests.support.refunds import REFUND, refund_body
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import PAYER_KEY, gateway, pay, relayer_of, settle_all

pytestmark = pytest.mark.integration

ETH = 10**18
TUSD = 10**6
PAYER = Account.from_key(PAYER_KEY).address


class Shop:
    """An owner with an API key, a signing secret and one endpoint, on the real app."""

    def __init__(self, services: Services, http: httpx.AsyncClient, hooks: Receiver) -> None:
        self.services = services
        self.http = http
        self.hooks = hooks
        self.owner: LocalAccount = new_owner()
        self.api_key = ""
        self.secret = ""
        self.endpoint: dict[str, Any] = {}

    @property
    def headers(self) -> dict[str, str]:
        return key_headers(self.api_key)

    async def open(self, events: list[str]) -> Shop:
        self.api_key = await issue_api_key(self.services, self.owner)
        owner = {"ownerAddress": self.owner.address}
        secret = await self.http.post(
            "/integration/webhook-secrets", json=owner, headers=self.headers
        )
        self.secret = secret.json()["secret"]
        body = {**owner, "url": self.hooks.url(self.owner.address), "events": events}
        endpoint = await self.http.post(
            "/integration/webhook-endpoints", json=body, headers=self.headers
        )
        assert endpoint.status_code == 201, endpoint.text
        self.endpoint = endpoint.json()
        return self

    async def invoice(self, amount: str, **fields: Any) -> Invoice:
        (chain,) = self.services.chains.all()
        body = {
            "ownerAddress": self.owner.address,
            "chainId": chain.config.chain_id,
            "amount": amount,
        }
        answer = await self.http.post(
            "/integration/invoices", json={**body, **fields}, headers=self.headers
        )
        assert answer.status_code == 201, answer.text
        async with self.services.db.sessions() as session:
            row = await session.get(Invoice, answer.json()["id"])
        assert row is not None
        return row

    async def lookup(self, invoice: Invoice) -> dict[str, Any]:
        """The status lookup (a live re-check): the owner's representation."""
        answer = await self.http.get(
            "/integration/invoices/status",
            params={"ownerAddress": self.owner.address, "paymentAddress": invoice.payment_address},
            headers=self.headers,
        )
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()["invoice"]
        return found

    async def events(self) -> list[dict[str, Any]]:
        answer = await self.http.get(
            "/integration/events", params={"ownerAddress": self.owner.address}, headers=self.headers
        )
        items: list[dict[str, Any]] = answer.json()["items"]
        return items

    async def received(self) -> list[Received]:
        """What the endpoint got, once every due delivery is sent; each checked as a receiver
        would: the signature over the raw body, the event id header."""
        await deliver_due(self.services)
        got = self.hooks.at(self.owner.address)
        for request in got:
            assert verified(request, self.secret)
            assert request.headers["x-service-event-id"] == request.body["id"]
        return got


@pytest.fixture(scope="module")
async def hooks() -> AsyncIterator[Receiver]:
    async with receiver() as recv:
        yield recv


@pytest.fixture
async def shop_app(
    make_services: MakeServices, module_database: str, hooks: Receiver
) -> AsyncIterator[tuple[Services, httpx.AsyncClient]]:
    services = await make_services(database_url=module_database)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield services, http
    async with services.db.transaction() as session:  # nothing due for the next test
        await session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.status == EventStatus.PENDING)
            .values(status=EventStatus.FAILED)
        )


async def new_shop(
    shop_app: tuple[Services, httpx.AsyncClient], hooks: Receiver, events: list[str]
) -> Shop:
    return await Shop(*shop_app, hooks).open(events)


async def deliver_due(services: Services) -> None:
    client = client_for(services)
    dispatcher = Dispatcher(services, client)
    try:
        while await dispatcher.claim():
            await dispatcher.drain()
    finally:
        await client.aclose()


def verified(received: Received, secret: str) -> bool:
    """t=<s>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>, checked here, not by the service."""
    fields = [f.split("=", 1) for f in received.headers["x-service-webhook-signature"].split(",")]
    assert fields[0][0] == "t"
    message = f"{fields[0][1]}.".encode() + received.raw
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return expected in [value for name, value in fields[1:] if name == "v1"]


def by_type(received: list[Received]) -> dict[str, dict[str, Any]]:
    bodies = {r.body["type"]: r.body for r in received}
    assert len(bodies) == len(received)  # one of each
    return bodies


async def test_partial_then_overpayment_and_the_spec_webhook(
    shop_app: tuple[Services, httpx.AsyncClient], hooks: Receiver, evm: EvmClient
) -> None:
    shop = await new_shop(shop_app, hooks, ["*"])
    webhook_url = hooks.url(f"{shop.owner.address}/paid")
    invoice = await shop.invoice("1", webhookUrl=webhook_url)

    await pay(evm, invoice, 4 * ETH // 10)
    partial = await shop.lookup(invoice)
    await pay(evm, invoice, 7 * ETH // 10)
    paid = await shop.lookup(invoice)
    # The paid webhook waits for the payments of record: none is due before the monitor's
    # step records the transfers.
    await deliver_due(shop.services)
    assert hooks.at(f"{shop.owner.address}/paid") == []
    (chain,) = shop.services.chains.all()
    await run_records_step(shop.services, chain, await chain.block_number())
    recorded = await shop.lookup(invoice)

    got = by_type(await shop.received())
    assert sorted(got) == [
        "invoice.overpaid",
        "invoice.paid",
        "invoice.partially_paid",
        "invoice.payment_recorded",
    ]
    assert got["invoice.partially_paid"]["data"] == {"invoice": partial}
    assert partial["balanceRaw"] == str(4 * ETH // 10) and partial["status"] == "pending"
    assert got["invoice.paid"]["data"] == got["invoice.overpaid"]["data"] == {"invoice": paid}
    assert (paid["status"], paid["balanceRaw"]) == ("paid", str(11 * ETH // 10))
    payments = recorded["payments"]
    assert [(p["from"], p["amountRaw"], p["tokenAddress"]) for p in payments] == [
        (PAYER, str(4 * ETH // 10), None),
        (PAYER, str(7 * ETH // 10), None),
    ]
    assert got["invoice.payment_recorded"]["data"]["payments"] == payments
    assert [e["type"] for e in await shop.events()][3:] == ["invoice.partially_paid"]
    # The paid webhook, exactly as before: its payload, the API key, its own event id.
    (spec,) = hooks.at(f"{shop.owner.address}/paid")
    assert spec.body == {
        "ownerAddress": shop.owner.address,
        "chainId": invoice.chain_id,
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "salt": invoice.salt,
        "capture": "automatic",
        "amount": "1",
        "tokenAddress": None,
        "status": "paid",
        "paid": True,
        "paidAt": paid["paidAt"],
        "requiredRaw": str(ETH),
        "balanceRaw": str(11 * ETH // 10),
        "balance": 1.1,
        "updatedAt": paid["updatedAt"],
        "payments": payments,
    }
    assert spec.headers["x-service-api-key"] == shop.api_key
    assert spec.headers["x-service-delivery-attempt"] == "1"
    paid_event = got["invoice.paid"]["id"]
    assert spec.headers["x-service-event-id"] != paid_event
    shown = (
        await shop.http.get(
            f"/integration/events/{paid_event}",
            params={"ownerAddress": shop.owner.address},
            headers=shop.headers,
        )
    ).json()
    assert sorted((d["target"], d["status"]) for d in shown["deliveries"]) == [
        ("endpoint", "delivered"),
        ("webhookUrl", "delivered"),
    ]

    again = await shop.http.post(
        f"/integration/events/{paid_event}/redeliver",
        json={"ownerAddress": shop.owner.address, "webhookUrl": True},
        headers=shop.headers,
    )
    not_paid = await shop.http.post(
        f"/integration/events/{got['invoice.overpaid']['id']}/redeliver",
        json={"ownerAddress": shop.owner.address, "webhookUrl": True},
        headers=shop.headers,
    )
    await deliver_due(shop.services)

    assert again.status_code == 202, again.text
    assert again.json()["endpointId"] is None
    first, second = hooks.at(f"{shop.owner.address}/paid")
    assert second.raw == first.raw
    assert second.headers["x-service-api-key"] == shop.api_key
    assert second.headers["x-service-event-id"] == again.json()["deliveryId"]
    # The invoice's webhook listing stays the paid webhook's: both deliveries, no event's.
    listing = await shop.http.get(
        "/integration/invoices/webhooks",
        params={"ownerAddress": shop.owner.address, "paymentAddress": invoice.payment_address},
        headers=shop.headers,
    )
    assert sorted(e["eventId"] for e in listing.json()["events"]) == sorted(
        [first.headers["x-service-event-id"], second.headers["x-service-event-id"]]
    )
    assert not_paid.status_code == 400
    assert not_paid.json()["error"]["code"] == "invalid_request"
    assert len(hooks.at(shop.owner.address)) == 4  # nothing more to the endpoint


async def test_expiry_late_payment_and_cancel_go_to_an_endpoint_that_takes_them(
    shop_app: tuple[Services, httpx.AsyncClient], hooks: Receiver, evm: EvmClient
) -> None:
    shop = await new_shop(
        shop_app, hooks, ["invoice.expired", "invoice.late_paid", "invoice.cancelled"]
    )
    late = await shop.invoice("0.5")
    cancelled = await shop.invoice("0.5")
    async with shop.services.db.transaction() as session:
        await session.execute(
            update(Invoice)
            .where(Invoice.id == late.id)
            .values(expires_at=shop.services.clock.now_ms() - 1000)
        )

    expired = await shop.lookup(late)
    await pay(evm, late, ETH // 2)
    paid_late = await shop.lookup(late)
    deleted = await shop.http.delete(
        "/integration/invoices",
        params={
            "ownerAddress": shop.owner.address,
            "chainId": str(cancelled.chain_id),
            "invoiceId": cancelled.invoice_id,
        },
        headers=shop.headers,
    )
    assert deleted.status_code == 200

    got = by_type(await shop.received())
    assert sorted(got) == ["invoice.cancelled", "invoice.expired", "invoice.late_paid"]
    assert expired["status"] == "expired"
    assert got["invoice.expired"]["data"] == {"invoice": expired}
    assert got["invoice.late_paid"]["data"] == {"invoice": paid_late}
    assert paid_late["status"] == "paid"
    cancelled_view = got["invoice.cancelled"]["data"]["invoice"]
    assert (cancelled_view["id"], cancelled_view["status"]) == (cancelled.id, "cancelled")
    # invoice.paid went to no endpoint (this one does not take it) but is listed.
    assert sorted(e["type"] for e in await shop.events()) == [
        "invoice.cancelled",
        "invoice.expired",
        "invoice.late_paid",
        "invoice.paid",
    ]


async def test_a_refund_and_the_sweep_are_events(
    shop_app: tuple[Services, httpx.AsyncClient],
    hooks: Receiver,
    evm: EvmClient,
    dev: DevDeployment,
) -> None:
    shop = await new_shop(shop_app, hooks, ["invoice.refunded", "invoice.completed"])
    services = shop.services
    invoice = await shop.invoice("10", tokenAddress=dev.token)
    await pay(evm, invoice, 12_500_000)
    assert (await shop.lookup(invoice))["status"] == "paid"
    payer = new_owner().address

    body = await refund_body(evm, dev, shop.owner, invoice, payer, 2_500_000)
    answer = await shop.http.post(REFUND, json=body, headers=shop.headers)
    assert answer.status_code == 202, answer.text
    await settle_all(services)
    refunded = await shop.lookup(invoice)
    await plan_withdrawals(
        services,
        gateway(services),
        relayer_of(services),
        full=True,
        owner_key=shop.owner.address.lower(),
    )
    await settle_all(services)
    completed = await shop.lookup(invoice)

    got = by_type(await shop.received())
    assert sorted(got) == ["invoice.completed", "invoice.refunded"]
    refund = {
        "txHash": answer.json()["txHash"],
        "to": payer,
        "tokenAddress": dev.token,
        "amountRaw": "2500000",
        "status": "confirmed",
        "createdAt": refunded["refunds"][0]["createdAt"],
    }
    assert got["invoice.refunded"]["data"] == {"invoice": refunded, "refund": refund}
    assert (refunded["status"], refunded["refunds"]) == ("paid", [refund])
    assert got["invoice.completed"]["data"] == {"invoice": completed}
    assert (completed["status"], completed["withdrawn"]) == ("completed", True)
    async with services.db.sessions() as session:
        left = await session.scalars(
            select(WebhookEvent.status).where(WebhookEvent.owner_key == shop.owner.address.lower())
        )
        assert set(left) == {"delivered"}
