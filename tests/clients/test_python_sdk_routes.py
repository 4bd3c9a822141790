"""The Python SDK's calls beyond invoices, fees and API keys, against a real ``invoicing dev``:
webhook signing secrets and endpoints, events and their redelivery, settings, the escrow
export, an invoice's webhook log, a refund relayed and confirmed, and the public routes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing_client import AsyncClient, Client, webhooks
from invoicing_client import errors as e
from invoicing_client._typed import set_fee_typed_data
from invoicing_client.signing import sign_typed_data
from tests.clients.conftest import DevService, RawReceiver, pay, rpc

PAYER = Account.from_key(DEV_PRIVATE_KEYS[7]).address
T = TypeVar("T")


def signing_client(dev: DevService, owner: LocalAccount) -> Client:
    return Client(dev.base_url, owner.address, private_key=owner.key.to_0x_hex())


def wait_for(read: Callable[[], T | None], what: str, timeout_s: float = 30) -> T:
    deadline = time.monotonic() + timeout_s
    while (found := read()) is None:
        assert time.monotonic() < deadline, f"{what}: not in time"
        time.sleep(0.2)
    return found


def test_secrets_endpoints_events_and_redelivery(
    dev_service: DevService, raw_receiver: RawReceiver
) -> None:
    owner: LocalAccount = Account.create()
    with signing_client(dev_service, owner) as client:
        secret = client.webhook_secrets.create()
        endpoint = client.webhook_endpoints.create(
            raw_receiver.url("/events"), ["invoice.paid"], description="shop"
        )
        updated = client.webhook_endpoints.update(endpoint.id, description="shop 2")
        ping = client.webhook_endpoints.test(endpoint.id)
        (first,) = raw_receiver.wait_for("/events")
        listed = [event.id for event in client.events.list(type="ping", page_size=1)]
        detail = client.events.get(ping.event_id)
        again = client.events.redeliver(ping.event_id, endpoint.id)
        second = raw_receiver.wait_for("/events", count=2)[1]
        first_page = client.events.get(ping.event_id, limit=1)  # signed, with the query
        last_page = client.events.get(ping.event_id, after=first_page.deliveries[0].id)
        delivered = wait_for(
            lambda: [e.id for e in client.events.list(delivery_status="delivered")] or None,
            "the ping recorded as delivered",
        )
        failing = list(client.events.list(delivery_status="failing"))
        secrets = client.webhook_secrets.list()
        deleted = client.webhook_endpoints.delete(endpoint.id)
        revoked = client.webhook_secrets.revoke(secret.id)
        with pytest.raises(e.NotFound):
            client.events.get("no-such-event")
        left = (
            client.webhook_endpoints.list(),
            [(s.id, s.revoked_at) for s in client.webhook_secrets.list()],
        )

    assert secret.secret.startswith("whsec_")
    assert (endpoint.enabled, endpoint.events, updated.description) == (
        True,
        ["invoice.paid"],
        "shop 2",
    )
    assert (ping.endpoint_id, listed, detail.event.id) == (
        endpoint.id,
        [ping.event_id],
        ping.event_id,
    )
    assert [delivery.endpoint_id for delivery in detail.deliveries] == [endpoint.id]
    assert again.event_id == ping.event_id
    assert (len(first_page.deliveries), first_page.has_more) == (1, True)
    assert [d.id for d in last_page.deliveries] == [again.delivery_id]
    assert last_page.has_more is False
    assert (delivered, failing) == ([ping.event_id], [])
    for delivery in (first, second):
        event = webhooks.verify(delivery.headers, delivery.body, signing_secret=secret.secret)
        assert isinstance(event, webhooks.EventEnvelope)
        assert (event.id, event.type) == (ping.event_id, "ping")
    assert [(s.id, s.revoked_at) for s in secrets] == [(secret.id, None)]
    assert (deleted.deleted, revoked.revoked, revoked.id) == (True, True, secret.id)
    assert left == ([], [(secret.id, revoked.revoked_at)])  # a revoked secret stays listed


async def test_settings_export_webhook_log_and_public_routes(dev_service: DevService) -> None:
    owner: LocalAccount = Account.create()
    async with AsyncClient(
        dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()
    ) as client:
        before = await client.settings.get()
        after = await client.settings.update(webhook_api_key_header=False)
        invoice = await client.invoices.create(dev_service.chain_id, "0.01")
        exported = await client.escrows.export(dev_service.chain_id)
        log = await client.invoices.webhooks(invoice.payment_address)
        health = await client.public.health()
        ready = await client.public.ready()
        status = await client.public.payment_status(invoice.payment_address)
        page = await client.public.payment_page(invoice.payment_address)
        page_es = await client.public.payment_page(invoice.payment_address, lang="es")

    assert (before.webhook_api_key_header, after.webhook_api_key_header) == (True, False)
    assert [(line.payment_address, line.salt) for line in exported] == [
        (invoice.payment_address, invoice.salt)
    ]
    assert (log.payment_address, log.events, log.items) == (invoice.payment_address, [], [])
    assert (health.status, ready.ready) == ("ok", True)
    assert '<html lang="en" dir="ltr">' in page and '<html lang="es" dir="ltr">' in page_es
    assert "Solicitud de pago" in page_es
    assert (status.required_raw, status.remaining_raw, status.remaining) == (10**16, 10**16, "0.01")
    assert "<html" in page.lower()


def test_a_refund_is_relayed_and_confirmed_and_a_signed_set_fee_relayed_publicly(
    dev_service: DevService,
) -> None:
    owner: LocalAccount = Account.create()
    refundee = Account.create().address
    with signing_client(dev_service, owner) as client:
        invoice = client.invoices.create(dev_service.chain_id, "0.25")
        pay(dev_service, PAYER, invoice.payment_address, 10**17)
        # A partly paid invoice is still pending, and a pending invoice takes no refund:
        # the owner cancels it first (docs/integration/refunds.md).
        client.invoices.delete(dev_service.chain_id, invoice.invoice_id)
        with pytest.raises(TypeError, match="raw units"):
            client.invoices.refund(invoice.payment_address, refundee, "0.04")  # type: ignore[arg-type]
        refund = client.invoices.refund(
            invoice.payment_address, refundee, 4 * 10**16, factory=dev_service.factory
        )
        confirmed = wait_for(
            lambda: next(
                (
                    r
                    for r in client.invoices.status(invoice.payment_address).refunds or []
                    if r.status == "confirmed"
                ),
                None,
            ),
            "the refund confirmed",
        )
        deadline = int(time.time()) + 600
        typed = set_fee_typed_data(
            dev_service.chain_id, dev_service.factory, owner.address, 40, 1, deadline
        )
        relayed = client.public.relay_fee(
            dev_service.chain_id, 40, 1, deadline, sign_typed_data(owner.key.to_0x_hex(), typed)
        )
        settings = wait_for(
            lambda: (s := client.fees.get(dev_service.chain_id)).fee_bps == 40 and s or None,
            "the relayed SetFee mined",
        )

    assert (refund.status, refund.nonce) == ("submitted", 0)
    assert (confirmed.to, confirmed.amount_raw, confirmed.token_address) == (
        refundee,
        4 * 10**16,
        None,
    )
    assert int(rpc(dev_service, "eth_getBalance", [refundee, "latest"]), 16) == 4 * 10**16
    assert (relayed.status, relayed.nonce, settings.nonce) == ("submitted", 1, 2)
