"""Refunds after the sweep, on anvil over real HTTP: a completed invoice's escrow is empty, so
the dashboard offers the refund paid from the owner's wallet; the transfer the owner sent is
checked on chain and recorded with its invoice.refunded event, and a transaction that is not
that refund is refused with nothing recorded."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.evm import EvmClient
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event
from invoicing.tables.refunds import WalletRefund
from tests.conftest import MakeServices
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.signing import new_owner
from tests.support.withdrawals import gateway, paid_invoice, relayer_of, reload, settle_all

pytestmark = pytest.mark.integration

FUNDER_KEY = DEV_PRIVATE_KEYS[8]


async def completed_invoice(services: Services, evm: EvmClient, owner: str) -> Invoice:
    invoice = await paid_invoice(services, evm, owner, "0.01")
    await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    await settle_all(services)
    done = await reload(services, invoice.id)
    assert done.status == "completed"
    return done


async def send(evm: EvmClient, account: LocalAccount, to: str, value: int) -> str:
    receipt = await evm.transact(account.key.to_0x_hex(), to, value=value)
    assert receipt["status"] == 1
    return str(receipt["transactionHash"])


async def post_refund(
    http: httpx.AsyncClient, csrf: str, invoice: Invoice, body: dict[str, Any]
) -> httpx.Response:
    return await http.post(
        f"/dashboard/invoices/{invoice.id}/wallet-refund",
        json=body,
        headers={"x-csrf-token": csrf},
    )


async def recorded(services: Services, invoice: Invoice) -> tuple[int, int]:
    """(wallet refunds, invoice.refunded events) of the invoice."""
    async with services.db.sessions() as session:
        refunds = await session.scalar(
            select(func.count())
            .select_from(WalletRefund)
            .where(WalletRefund.invoice_id == invoice.id)
        )
        events = await session.scalar(
            select(func.count())
            .select_from(Event)
            .where(Event.invoice_pk == invoice.id, Event.type == "invoice.refunded")
        )
    return int(refunds or 0), int(events or 0)


async def test_a_swept_invoice_is_refunded_from_the_owners_wallet_and_recorded(
    make_services: MakeServices, evm: EvmClient
) -> None:
    owner, payer = new_owner(), new_owner().address
    await evm.transact(FUNDER_KEY, owner.address, value=10**18)
    async with dashboard_app(make_services) as app:
        services = app.services
        invoice = await completed_invoice(services, evm, owner.address)
        assert (await sign_in(app.http, owner, invoice.chain_id)).status_code == 200
        page = (await app.http.get(f"/dashboard/invoices/{invoice.id}")).text
        csrf = csrf_of(page)
        assert "Sign and refund" not in page
        assert "Send the refund from my wallet" in page
        prepared = await app.http.post(
            f"/dashboard/invoices/{invoice.id}/wallet-refund/prepare",
            json={"to": payer, "amount": "0.004"},
            headers={"x-csrf-token": csrf},
        )
        assert prepared.status_code == 200, prepared.text
        assert prepared.json()["tx"] == {
            "from": owner.address,
            "to": payer,
            "value": hex(4 * 10**15),
        }

        wrong = await send(evm, owner, payer, 3 * 10**15)
        refused = await post_refund(
            app.http, csrf, invoice, {"txHash": wrong, "to": payer, "amountRaw": str(4 * 10**15)}
        )
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "invalid_request"
        assert refused.json()["error"]["details"] == {"reason": "wrong_amount"}
        assert await recorded(services, invoice) == (0, 0)

        tx_hash = await send(evm, owner, payer, 4 * 10**15)
        body = {"txHash": tx_hash, "to": payer, "amountRaw": str(4 * 10**15)}
        answer = await post_refund(app.http, csrf, invoice, body)
        assert answer.status_code == 201, answer.text
        again = await post_refund(app.http, csrf, invoice, body)
        assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")

        shown = await app.http.get(f"/dashboard/invoices/{invoice.id}")

    assert await recorded(services, invoice) == (1, 1)
    async with services.db.sessions() as session:
        event = await session.scalar(
            select(Event).where(Event.invoice_pk == invoice.id, Event.type == "invoice.refunded")
        )
    assert event is not None
    assert event.data["refund"] == {
        "txHash": tx_hash,
        "to": payer,
        "tokenAddress": None,
        "amountRaw": str(4 * 10**15),
        "status": "confirmed",
        "createdAt": event.data["refund"]["createdAt"],
    }
    assert event.data["invoice"]["refunds"] == [event.data["refund"]]
    assert tx_hash in shown.text
    assert (await reload(services, invoice.id)).status == "completed"


async def test_a_refund_from_another_sender_or_of_a_paid_invoice_is_refused(
    make_services: MakeServices, evm: EvmClient
) -> None:
    owner, payer = new_owner(), new_owner().address
    async with dashboard_app(make_services) as app:
        services = app.services
        invoice = await completed_invoice(services, evm, owner.address)
        paid = await paid_invoice(services, evm, owner.address, "0.01")
        assert (await sign_in(app.http, owner, invoice.chain_id)).status_code == 200
        csrf = csrf_of((await app.http.get(f"/dashboard/invoices/{invoice.id}")).text)
        stranger = await evm.transact(FUNDER_KEY, payer, value=10**15)
        body = {"txHash": stranger["transactionHash"], "to": payer, "amountRaw": str(10**15)}

        not_owner = await post_refund(app.http, csrf, invoice, body)
        not_swept = await post_refund(app.http, csrf, paid, body)
        unmined = await post_refund(app.http, csrf, invoice, {**body, "txHash": "0x" + "12" * 32})

    assert (not_owner.status_code, not_owner.json()["error"]["details"]) == (
        400,
        {"reason": "not_from_owner"},
    )
    assert (not_swept.status_code, not_swept.json()["error"]["code"]) == (409, "conflict")
    assert (unmined.status_code, unmined.json()["error"]["code"]) == (409, "conflict")
    assert await recorded(services, invoice) == (0, 0)
    assert await recorded(services, paid) == (0, 0)
