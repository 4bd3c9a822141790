"""Payers' receipts: asked for on the payment page of an owner who sends them, mailed
through a real SMTP server once the invoice is paid on anvil."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from invoicing.chain.evm import EvmClient
from invoicing.monitor.check import recheck_invoice
from invoicing.notifications.mail import worker as mail_worker
from invoicing.tables.mail import MailMessage, ReceiptRequest
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.smtp import SmtpServer
from tests.support.withdrawals import new_invoice, pay

MAIL = "/integration/settings/notifications"


@pytest.fixture(scope="module")
def database_url(module_database: str) -> str:
    """A database of this module's own: the mail worker sends every due message of its
    database, and other modules' tests leave theirs in the run's shared one."""
    return module_database


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def app(make_services: MakeServices, smtp: SmtpServer) -> AsyncIterator[RunningApp]:
    services = await make_services(smtp_url=smtp.url, smtp_from="shop@shop.example")
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def owner_sending_receipts(app: RunningApp, receipts: bool) -> Any:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))
    body = {"ownerAddress": owner.address, "email": "owner@shop.example", "events": []}
    put = await app.http.put(MAIL, json={**body, "receipts": receipts}, headers=headers)
    assert put.status_code == 200 and put.json()["receipts"] is receipts, put.text
    return owner


async def stored(app: RunningApp, model: Any) -> list[Any]:
    async with app.services.db.sessions() as session:
        return list(await session.scalars(select(model)))


async def test_a_payer_asks_for_a_receipt_and_gets_it_once_paid(
    app: RunningApp, evm: EvmClient, smtp: SmtpServer
) -> None:
    owner = await owner_sending_receipts(app, True)
    invoice = await new_invoice(app.services, owner.address, "0.001")
    receipt = f"/pay/{invoice.payment_address}/receipt"

    page = await app.http.get(f"/pay/{invoice.payment_address}", params={"lang": "fr"})
    asked = await app.http.post(
        receipt, params={"lang": "fr"}, json={"email": "payer@mail.example"}
    )
    await pay(evm, invoice, int(invoice.required_raw))
    paid = await recheck_invoice(app.services, invoice)
    mailer = mail_worker.mailer_for(app.services.settings)
    assert mailer is not None
    sent = await mail_worker.send_due(app.services, mailer)
    after = await app.http.get(f"/pay/{invoice.payment_address}")

    assert 'id="receipt-form"' in page.text and "Recevoir un reçu par e-mail" in page.text
    assert asked.status_code == 200 and asked.json() == {"email": "payer@mail.example"}
    assert paid.status == "paid" and sent == 1
    (received,) = smtp.inbox.received
    assert received.recipients == ["payer@mail.example"]
    assert received.message["Subject"] == (
        f"Reçu : votre paiement de la facture {invoice.invoice_id} est arrivé"
    )
    assert 'id="receipt-form"' not in after.text  # paid: nothing to ask for any more
    (message,) = [m for m in await stored(app, MailMessage) if m.recipient.startswith("payer")]
    assert set(message.data["invoice"]) <= {
        "invoiceId",
        "status",
        "amount",
        "tokenAddress",
        "chainId",
        "paymentAddress",
        "url",
    }


@pytest.mark.parametrize(
    ("receipts", "body", "status", "code"),
    [
        (False, {"email": "payer@mail.example"}, 403, "forbidden"),
        (True, {"email": "payer@mail.example\r\nBcc: x@evil.example"}, 400, "invalid_request"),
        (True, {"email": "not an address"}, 400, "invalid_request"),
        (True, {"email": "payer@mail.example", "cc": "x@evil.example"}, 400, "invalid_request"),
    ],
)
async def test_a_refused_receipt_request_stores_nothing(
    app: RunningApp, receipts: bool, body: dict[str, str], status: int, code: str
) -> None:
    owner = await owner_sending_receipts(app, receipts)
    invoice = await new_invoice(app.services, owner.address, "0.001")

    page = await app.http.get(f"/pay/{invoice.payment_address}")
    answer = await app.http.post(f"/pay/{invoice.payment_address}/receipt", json=body)

    assert ('id="receipt-form"' in page.text) is receipts
    assert answer.status_code == status and answer.json()["error"]["code"] == code
    assert [r for r in await stored(app, ReceiptRequest) if r.invoice_pk == invoice.id] == []


async def test_no_receipt_for_a_paid_invoice_or_an_unknown_address(
    app: RunningApp, evm: EvmClient
) -> None:
    owner = await owner_sending_receipts(app, True)
    invoice = await new_invoice(app.services, owner.address, "0.001")
    await pay(evm, invoice, int(invoice.required_raw))
    await recheck_invoice(app.services, invoice)
    email = {"email": "payer@mail.example"}

    late = await app.http.post(f"/pay/{invoice.payment_address}/receipt", json=email)
    unknown = await app.http.post(f"/pay/0x{'ab' * 20}/receipt", json=email)

    assert late.status_code == 409 and late.json()["error"]["code"] == "invoice_not_payable"
    assert unknown.status_code == 404
    assert [r for r in await stored(app, ReceiptRequest) if r.invoice_pk == invoice.id] == []
