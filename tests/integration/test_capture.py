"""Authorize, then capture, on anvil over real HTTP: a manual-capture invoice paid is not
swept until captured (by the owner, or at the end of the capture window), a void pays the
payer back and is never swept, every refusal has its code with nothing changed, and a shop's
refund delegate refunds until revoked."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select, update

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.services import Services
from invoicing.settlement.worker import settlement_step
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.refunds import REFUND, refund_body, set_delegate
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    gateway,
    pay,
    relayer_of,
    relayer_tx_count,
    reload,
    settle_all,
)

pytestmark = pytest.mark.integration

CAPTURE = "/integration/invoices/capture"
VOID = "/integration/invoices/void"
PRICE = 10**16  # "0.01" of the native coin


async def manual_invoice(
    app: RunningApp, evm: EvmClient, owner: LocalAccount, api_key: str, *, paid: bool = True
) -> Invoice:
    """A manual-capture invoice created over HTTP, paid in full and seen paid (``paid``)."""
    answer = await app.http.post(
        "/integration/invoices",
        json={
            "ownerAddress": owner.address,
            "chainId": gateway(app.services).config.chain_id,
            "amount": "0.01",
            "capture": "manual",
        },
        headers=key_headers(api_key),
    )
    assert answer.status_code == 201, answer.text
    created = answer.json()
    assert (created["capture"], created["capturedAt"], created["voidedAt"]) == (
        "manual",
        None,
        None,
    )
    invoice = await reload(app.services, created["id"])
    if paid:
        await pay(evm, invoice, PRICE)
        shown = await lookup(app, api_key, owner.address, invoice)
        assert shown["status"] == "paid"
    return await reload(app.services, created["id"])


async def lookup(app: RunningApp, api_key: str, owner: str, invoice: Invoice) -> dict[str, Any]:
    answer = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner, "paymentAddress": invoice.payment_address},
        headers=key_headers(api_key),
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["invoice"]
    return found


async def capture(app: RunningApp, api_key: str, owner: str, invoice: Invoice) -> Any:
    return await app.http.post(
        CAPTURE,
        json={
            "ownerAddress": owner,
            "chainId": invoice.chain_id,
            "paymentAddress": invoice.payment_address,
        },
        headers=key_headers(api_key),
    )


async def full_pass(services: Services, owner: str) -> int:
    """The settlement worker's full pass (sweeps of ``owner``'s escrows only: the database
    may hold other tests' invoices); returns how many transactions it sent."""
    chain, relayer = gateway(services), relayer_of(services)
    sent = await settlement_step(services, chain, relayer, True, owner_key=owner.lower())
    return len(sent)


async def event_types(services: Services, invoice: Invoice) -> list[str]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(Event.type).where(Event.invoice_pk == invoice.id).order_by(Event.created_at)
        )
        return list(rows)


async def test_a_manual_invoice_is_swept_only_once_captured(
    app: RunningApp, evm: EvmClient
) -> None:
    services = app.services
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    invoice = await manual_invoice(app, evm, owner, api_key)

    assert await full_pass(services, owner.address) == 0
    assert await balance_of(evm, invoice.payment_address) == PRICE
    assert (await reload(services, invoice.id)).status == "paid"

    first = await capture(app, api_key, owner.address, invoice)
    again = await capture(app, api_key, owner.address, invoice)

    assert first.status_code == again.status_code == 200, first.text
    captured_at = (await reload(services, invoice.id)).captured_at
    assert captured_at is not None
    assert (
        first.json()
        == again.json()
        == {
            "ownerAddress": owner.address,
            "chainId": invoice.chain_id,
            "invoiceId": invoice.invoice_id,
            "paymentAddress": invoice.payment_address,
            "capture": "manual",
            "capturedAt": captured_at,
        }
    )
    assert await full_pass(services, owner.address) == 1
    await settle_all(services)
    assert await balance_of(evm, invoice.payment_address) == 0
    assert await balance_of(evm, owner.address) == PRICE
    shown = await lookup(app, api_key, owner.address, invoice)
    assert (shown["status"], shown["withdrawn"], shown["capturedAt"]) == (
        "completed",
        True,
        captured_at,
    )
    assert await event_types(services, invoice) == [
        "invoice.paid",
        "invoice.captured",
        "invoice.completed",
    ]
    # Captured already: a capture again still answers as the first one did.
    late = await capture(app, api_key, owner.address, invoice)
    assert (late.status_code, late.json()) == (200, first.json())


async def test_capture_refusals_have_their_codes_and_change_nothing(
    app: RunningApp, evm: EvmClient
) -> None:
    services = app.services
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    unpaid = await manual_invoice(app, evm, owner, api_key, paid=False)
    automatic = await manual_invoice(app, evm, owner, api_key, paid=False)
    async with services.db.transaction() as session:
        await session.execute(
            update(Invoice).where(Invoice.id == automatic.id).values(capture="automatic")
        )
    await pay(evm, automatic, PRICE)
    assert (await lookup(app, api_key, owner.address, automatic))["status"] == "paid"
    cancelled = await manual_invoice(app, evm, owner, api_key, paid=False)
    deleted = await app.http.delete(
        "/integration/invoices",
        params={
            "ownerAddress": owner.address,
            "chainId": cancelled.chain_id,
            "invoiceId": cancelled.invoice_id,
        },
        headers=key_headers(api_key),
    )
    assert deleted.status_code == 200, deleted.text
    stranger = await capture(
        app, await issue_api_key(services, other := new_owner()), other.address, unpaid
    )

    refusals = {}
    for name, invoice in (("unpaid", unpaid), ("automatic", automatic), ("cancelled", cancelled)):
        before = await lookup(app, api_key, owner.address, invoice)
        answer = await capture(app, api_key, owner.address, invoice)
        refusals[name] = (answer.status_code, answer.json()["error"]["code"])
        after = await lookup(app, api_key, owner.address, invoice)
        assert after == {**before, "lastCheckedAt": after["lastCheckedAt"]}

    assert refusals == {
        "unpaid": (409, "invoice_not_paid"),
        "automatic": (409, "invoice_captured"),
        "cancelled": (409, "invoice_not_paid"),
    }
    assert (stranger.status_code, stranger.json()["error"]["code"]) == (404, "not_found")
    assert await event_types(services, unpaid) == []


async def test_a_void_pays_the_payer_back_and_is_never_swept(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner = new_owner()
    payer = new_owner().address
    api_key = await issue_api_key(services, owner)
    invoice = await manual_invoice(app, evm, owner, api_key)
    body = await refund_body(evm, dev, owner, invoice, payer, PRICE)

    short_body = await refund_body(evm, dev, owner, invoice, payer, PRICE - 1)
    short = await app.http.post(VOID, json=short_body, headers=key_headers(api_key))
    answer = await app.http.post(VOID, json=body, headers=key_headers(api_key))

    assert (short.status_code, short.json()["error"]["code"]) == (400, "invalid_request")
    assert short.json()["error"]["details"]["balanceRaw"] == str(PRICE)
    assert answer.status_code == 202, answer.text
    in_flight = await capture(app, api_key, owner.address, invoice)
    assert (in_flight.status_code, in_flight.json()["error"]["code"]) == (409, "invoice_voided")
    await settle_all(services)
    assert await balance_of(evm, payer) == PRICE
    assert await balance_of(evm, invoice.payment_address) == 0
    shown = await lookup(app, api_key, owner.address, invoice)
    voided_at = (await reload(services, invoice.id)).voided_at
    assert voided_at is not None
    assert (shown["status"], shown["voidedAt"], shown["capturedAt"], shown["withdrawn"]) == (
        "cancelled",
        voided_at,
        None,
        False,
    )
    assert await event_types(services, invoice) == [
        "invoice.paid",
        "invoice.refunded",
        "invoice.voided",
    ]
    # Funds that reach a voided escrow are left for the owner to refund: never swept.
    await pay(evm, invoice, 12345)
    sent_before = await relayer_tx_count(services)
    assert await full_pass(services, owner.address) == 0
    assert await relayer_tx_count(services) == sent_before
    assert await balance_of(evm, invoice.payment_address) == 12345
    refusal = await capture(app, api_key, owner.address, invoice)
    assert (refusal.status_code, refusal.json()["error"]["code"]) == (409, "invoice_voided")


async def test_the_capture_window_captures_what_its_owner_left(
    app: RunningApp, evm: EvmClient
) -> None:
    services = app.services
    owner, holder = new_owner(), new_owner()
    api_key, holder_key = (
        await issue_api_key(services, owner),
        await issue_api_key(services, holder),
    )
    held = await app.http.put(
        "/integration/settings",
        json={"ownerAddress": holder.address, "captureAtWindowEnd": False, "captureWindowS": 3600},
        headers=key_headers(holder_key),
    )
    assert held.status_code == 200, held.text
    assert (held.json()["captureWindowS"], held.json()["captureAtWindowEnd"]) == (3600, False)
    within = await manual_invoice(app, evm, owner, api_key)
    over = await manual_invoice(app, evm, owner, api_key)
    left = await manual_invoice(app, evm, holder, holder_key)
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        await session.execute(
            update(Invoice)
            .where(Invoice.id.in_([over.id, left.id]))
            .values(paid_at=now_ms - 7 * 86_400_000 - 1)
        )
        await session.execute(
            update(Invoice).where(Invoice.id == within.id).values(paid_at=now_ms - 86_400_000)
        )

    assert await full_pass(services, owner.address) == 1
    await settle_all(services)

    assert await balance_of(evm, over.payment_address) == 0
    assert await balance_of(evm, owner.address) == PRICE
    assert (await reload(services, over.id)).status == "completed"
    assert await event_types(services, over) == [
        "invoice.paid",
        "invoice.captured",
        "invoice.completed",
    ]
    for kept in (within, left):
        row = await reload(services, kept.id)
        assert (row.status, row.captured_at) == ("paid", None)
        assert await balance_of(evm, kept.payment_address) == PRICE


async def test_a_refund_delegate_refunds_until_revoked(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, shop = new_owner(), new_owner()
    payer = new_owner().address
    api_key = await issue_api_key(services, owner)
    invoice = await manual_invoice(app, evm, owner, api_key)
    undelegated = await refund_body(evm, dev, owner, invoice, payer, 1000, signer=shop)
    refused_first = await app.http.post(REFUND, json=undelegated, headers=key_headers(api_key))
    assert refused_first.json()["error"]["code"] == "invalid_owner_signature"

    await set_delegate(app, evm, dev, owner, api_key, shop.address, nonce=0)
    body = await refund_body(evm, dev, owner, invoice, payer, 1000, nonce=1, signer=shop)
    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    assert answer.status_code == 202, answer.text
    assert answer.json()["ownerAddress"] == owner.address
    await settle_all(services)
    assert await balance_of(evm, payer) == 1000

    await set_delegate(
        app, evm, dev, owner, api_key, "0x0000000000000000000000000000000000000000", nonce=2
    )
    sent_before = await relayer_tx_count(services)
    again = await refund_body(evm, dev, owner, invoice, payer, 1000, nonce=3, signer=shop)
    refused = await app.http.post(REFUND, json=again, headers=key_headers(api_key))

    assert (refused.status_code, refused.json()["error"]["code"]) == (
        400,
        "invalid_owner_signature",
    )
    assert await relayer_tx_count(services) == sent_before
    assert await balance_of(evm, payer) == 1000
    # A native refund pays the rest to the owner, as a sweep would: that captured it.
    assert await balance_of(evm, owner.address) == PRICE - 1000
    assert (await reload(services, invoice.id)).captured_at is not None
