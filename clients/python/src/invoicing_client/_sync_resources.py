# Generated from _async_resources.py by clients/python/generate_sync.py: edit that file instead.
"""The resources of the client that need only its ``_send``: API keys, webhook signing
secrets, webhook endpoints, events, the escrow export, gasless payments and the public routes
(written for asyncio; the blocking ones are generated, see ``_async_client.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from invoicing_client import _calls as calls
from invoicing_client._transport import Call, Reply
from invoicing_client.models import (
    ApiKey,
    DeletedWebhookEndpoint,
    DeliveryAccepted,
    EscrowExportLine,
    EventDetail,
    EventEnvelope,
    EventPage,
    FeeSubmission,
    GaslessSettings,
    GaslessSubmission,
    Health,
    IssuedApiKey,
    IssuedWebhookSecret,
    PaymentStatus,
    Readiness,
    ReceiptRequested,
    RevokedApiKey,
    RevokedWebhookSecret,
    SettleResponse,
    SubscriptionOut,
    SupportedResponse,
    VerifyResponse,
    WebhookEndpoint,
    WebhookSecret,
)

T = TypeVar("T")


class Send(Protocol):
    """``Client._send``: one call with its retries, its answer read by ``read``."""

    def __call__(self, call: Call, read: Callable[[Reply], T]) -> T: ...


class ApiKeys:
    """API keys of the owner; managed in signature mode (the client needs private_key)."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def create(self, label: str | None = None) -> IssuedApiKey:
        """A new key; its secret is in the answer this once."""
        call = calls.call("api_keys.create", body=calls.given(label=label))
        return self._send(call, calls.model(IssuedApiKey))

    def list(self) -> list[ApiKey]:
        return self._send(calls.call("api_keys.list"), calls.models(ApiKey))

    def revoke(self, key_id: str) -> RevokedApiKey:
        call = calls.call("api_keys.revoke", query={"id": key_id})
        return self._send(call, calls.model(RevokedApiKey))


class WebhookSecrets:
    """Secrets that sign deliveries (``x-service-webhook-signature``); several may be active
    while rotating."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def create(self) -> IssuedWebhookSecret:
        """A new ``whsec_…`` secret; it is in the answer this once."""
        call = calls.call("webhook_secrets.create", body={})
        return self._send(call, calls.model(IssuedWebhookSecret))

    def list(self) -> list[WebhookSecret]:
        call = calls.call("webhook_secrets.list")
        return self._send(call, calls.models(WebhookSecret))

    def revoke(self, secret_id: str) -> RevokedWebhookSecret:
        call = calls.call("webhook_secrets.revoke", query={"id": secret_id})
        return self._send(call, calls.model(RevokedWebhookSecret))


class WebhookEndpoints:
    """Endpoints that receive the owner's events (``invoice.paid``, ``invoice.expired``…)."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def create(
        self, url: str, events: Sequence[str], description: str | None = None
    ) -> WebhookEndpoint:
        body = {"url": url, "events": list(events), **calls.given(description=description)}
        call = calls.call("webhook_endpoints.create", body=body)
        return self._send(call, calls.model(WebhookEndpoint))

    def list(self) -> list[WebhookEndpoint]:
        call = calls.call("webhook_endpoints.list")
        return self._send(call, calls.models(WebhookEndpoint))

    def update(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        events: Sequence[str] | None = None,
        enabled: bool | None = None,
        description: str | None = None,
    ) -> WebhookEndpoint:
        """Change what is given; ``enabled=True`` turns a disabled endpoint back on."""
        body = calls.given(
            url=url,
            events=None if events is None else list(events),
            enabled=enabled,
            description=description,
        )
        call = calls.call(
            "webhook_endpoints.update",
            query={"id": endpoint_id},
            body=body,
            signed_id=endpoint_id,
            idempotent=True,
        )
        return self._send(call, calls.model(WebhookEndpoint))

    def delete(self, endpoint_id: str) -> DeletedWebhookEndpoint:
        call = calls.call("webhook_endpoints.delete", query={"id": endpoint_id})
        return self._send(call, calls.model(DeletedWebhookEndpoint))

    def test(self, endpoint_id: str) -> DeliveryAccepted:
        """Send a ``ping`` event to the endpoint (202: queued)."""
        call = calls.call(
            "webhook_endpoints.test", query={"id": endpoint_id}, body={}, signed_id=endpoint_id
        )
        return self._send(call, calls.model(DeliveryAccepted))


class Events:
    def __init__(self, send: Send) -> None:
        self._send = send

    def page(
        self,
        *,
        type: str | None = None,
        delivery_status: str | None = None,
        after: str | None = None,
        limit: int = 20,
    ) -> EventPage:
        """One page of events, newest first; ``after``: the last id of the previous page.
        ``delivery_status`` (pending, failing, delivered, failed): only events with a
        delivery in that state, such as every failing delivery across events."""
        filters = calls.given(type=type, deliveryStatus=delivery_status, after=after)
        call = calls.call("events.page", query={**filters, "limit": limit})
        return self._send(call, calls.model(EventPage))

    def list(
        self,
        *,
        type: str | None = None,
        delivery_status: str | None = None,
        page_size: int = calls.MAX_PAGE_SIZE,
    ) -> Iterator[EventEnvelope]:
        """Every event (of ``type``, with a delivery in ``delivery_status``, when given),
        newest first, fetching pages as it goes."""
        after: str | None = None
        while True:
            result = self.page(
                type=type, delivery_status=delivery_status, after=after, limit=page_size
            )
            yield from result.items
            if not result.has_more or not result.items:
                return
            after = result.items[-1].id

    def get(
        self, event_id: str, *, after: str | None = None, limit: int | None = None
    ) -> EventDetail:
        """One event with a page of its deliveries (oldest first) and their attempts;
        ``after``: the last delivery id of the previous page (``has_more``: more follow),
        ``limit``: deliveries a page (the service's default: 20)."""
        call = calls.call(
            "events.get",
            path={"event_id": event_id},
            query=calls.given(after=after, limit=limit),
            signed_id=event_id,
        )
        return self._send(call, calls.model(EventDetail))

    def redeliver(self, event_id: str, endpoint_id: str | None = None) -> DeliveryAccepted:
        """Send the event again: to one endpoint, or (``endpoint_id`` None) to the invoice's
        webhookUrl (``invoice.paid`` events only)."""
        body: dict[str, Any] = (
            {"webhookUrl": True} if endpoint_id is None else {"endpointId": endpoint_id}
        )
        call = calls.call(
            "events.redeliver", path={"event_id": event_id}, body=body, signed_id=event_id
        )
        return self._send(call, calls.model(DeliveryAccepted))


class Escrows:
    def __init__(self, send: Send) -> None:
        self._send = send

    def export(self, chain_id: int) -> list[EscrowExportLine]:
        """Every escrow of the owner on a chain with its salt: what recovers the funds
        without the service."""
        call = calls.call("escrows.export", query={"chainId": chain_id})
        return self._send(call, calls.read_export)


class Gasless:
    """Whether payers may pay the owner's invoices without gas, per chain (off by default)."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def get(self, chain_id: int) -> GaslessSettings:
        call = calls.call("gasless.get", query={"chainId": chain_id})
        return self._send(call, calls.model(GaslessSettings))

    def set(self, chain_id: int, enabled: bool) -> GaslessSettings:
        """Turn gasless payments on or off; each one's gas counts against the owner's share
        of the relayer's daily budget."""
        call = calls.call("gasless.set", body={"chainId": chain_id, "enabled": enabled})
        return self._send(call, calls.model(GaslessSettings))


class Facilitator:
    """This service as the x402 v2 facilitator of the owner's own x402 server (API key
    only): the x402 specification's bodies and answers, as JSON objects."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def verify(self, request: dict[str, Any]) -> VerifyResponse:
        """``{x402Version, paymentPayload, paymentRequirements}``: checked, nothing sent."""
        call = calls.call("facilitator.verify", body=dict(request))
        return self._send(call, calls.model(VerifyResponse))

    def settle(self, request: dict[str, Any]) -> SettleResponse:
        """The same request, settled by the relayer (charged to the owner's share)."""
        call = calls.call("facilitator.settle", body=dict(request), idempotent=True)
        return self._send(call, calls.model(SettleResponse))

    def supported(self) -> SupportedResponse:
        call = calls.call("facilitator.supported")
        return self._send(call, calls.model(SupportedResponse))


class Public:
    """The routes anyone may call (no credential is sent): health, payment pages, and the
    relay of messages an owner signed in a wallet front end."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def health(self) -> Health:
        return self._send(calls.call("public.health"), calls.model(Health))

    def ready(self) -> Readiness:
        """Whether the database and every chain answer (``ready`` False: HTTP 503)."""
        call = calls.call("public.ready", accept=frozenset({503}))
        return self._send(call, calls.model(Readiness))

    def payment_page(self, payment_address: str, lang: str | None = None) -> str:
        """The hosted payment page's HTML, in ``lang`` (``es``, ``zh-Hans``, …) when given."""
        call = calls.call(
            "public.payment_page",
            path={"payment_address": payment_address},
            query=None if lang is None else {"lang": lang},
        )
        return self._send(call, calls.read_text)

    def payment_status(self, payment_address: str) -> PaymentStatus:
        """What the payment page shows: amounts, remaining, status."""
        call = calls.call("public.payment_status", path={"payment_address": payment_address})
        return self._send(call, calls.model(PaymentStatus))

    def pay_without_gas(
        self, payment_address: str, authorization: dict[str, Any]
    ) -> GaslessSubmission:
        """Submit a payer's signed EIP-3009 authorization for the invoice at
        ``payment_address`` (the body of docs/integration/gasless.md: chainId, tokenAddress,
        from, to, value, validAfter, validBefore, nonce, signature); the relayer pays the gas."""
        call = calls.call(
            "public.pay_without_gas",
            path={"payment_address": payment_address},
            body=dict(authorization),
            ownerless=True,
        )
        return self._send(call, calls.model(GaslessSubmission))

    def authorize_subscription(
        self,
        subscription_id: str,
        signature: str,
        payer: str | None = None,
        permit: dict[str, Any] | None = None,
    ) -> SubscriptionOut:
        """Submit the payer's signature of the subscription's ``authorization.typed_data``
        (``payer``: a contract wallet names itself; ``permit``: the payer's EIP-2612 permit,
        ``value``, ``deadline``, ``signature``, relayed before the first charge); period 0 is
        charged at once. The same authorization again charges nothing more."""
        call = calls.call(
            "public.authorize_subscription",
            path={"subscription_id": subscription_id},
            body={"signature": signature, **calls.given(payer=payer, permit=permit)},
            idempotent=True,
            ownerless=True,
        )
        return self._send(call, calls.model(SubscriptionOut, "subscription"))

    def cancel_subscription(self, subscription_id: str, signature: str) -> SubscriptionOut:
        """Relay the payer's (or the owner's) signed EIP-712 ``Cancel`` of the subscription:
        it is cancelled on chain. Posting it again sends nothing more."""
        call = calls.call(
            "public.cancel_subscription",
            path={"subscription_id": subscription_id},
            body={"signature": signature},
            idempotent=True,
            ownerless=True,
        )
        return self._send(call, calls.model(SubscriptionOut, "subscription"))

    def ask_receipt(
        self, payment_address: str, email: str, lang: str | None = None
    ) -> ReceiptRequested:
        """Ask for a receipt of the pending invoice at ``payment_address``, mailed to ``email``
        once it is paid, in ``lang`` (the payment page's language) when given; 403 when the
        owner sends none. Asking again replaces the address."""
        call = calls.call(
            "public.ask_receipt",
            path={"payment_address": payment_address},
            query=calls.given(lang=lang),
            body={"email": email},
            idempotent=True,
            ownerless=True,
        )
        return self._send(call, calls.model(ReceiptRequested))

    def x402_requirements(self, payment_address: str) -> dict[str, Any]:
        """The invoice's x402 resource asked without payment: the ``PaymentRequired`` object
        (402; pay it with an x402 client), or the payment page's status once nothing is due."""
        call = calls.call(
            "public.x402_requirements",
            path={"payment_address": payment_address},
            accept=frozenset({402}),
        )
        return self._send(call, calls.read_json)

    def relay_fee(
        self, chain_id: int, fee_bps: int, nonce: int, deadline: int, signature: str
    ) -> FeeSubmission:
        """Relay a SetFee the owner signed elsewhere, at ``nonce`` (no credential)."""
        fields = {"feeBps": fee_bps}
        call = calls.relay("public.relay_fee", chain_id, fields, nonce, deadline, signature)
        return self._send(call, calls.model(FeeSubmission))

    def relay_payout(
        self, chain_id: int, payout_address: str, nonce: int, deadline: int, signature: str
    ) -> FeeSubmission:
        """Relay a SetPayout the owner signed elsewhere, at ``nonce`` (no credential)."""
        fields = {"payoutAddress": payout_address}
        call = calls.relay("public.relay_payout", chain_id, fields, nonce, deadline, signature)
        return self._send(call, calls.model(FeeSubmission))
