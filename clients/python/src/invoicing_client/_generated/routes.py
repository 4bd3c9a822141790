# Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.
"""Every route of the service, named by the SDK method that calls it: each call is built
from its row."""

from __future__ import annotations

from typing import NamedTuple


class Route(NamedTuple):
    method: str
    path: str  # with {placeholders} for path parameters
    action: str | None  # the x-signature-action; None for the public routes
    query: tuple[str, ...] = ()  # the query parameters it takes, besides ownerAddress


ROUTES: dict[str, Route] = {
    "api_keys.create": Route("POST", "/integration/api-keys", "apikey.create"),
    "api_keys.list": Route("GET", "/integration/api-keys", "apikey.list"),
    "api_keys.revoke": Route("DELETE", "/integration/api-keys", "apikey.revoke", ("id",)),
    "escrows.export": Route("GET", "/integration/escrows/export", "escrow.export", ("chainId",)),
    "events.get": Route(
        "GET",
        "/integration/events/{event_id}",
        "event.get",
        (
            "after",
            "limit",
        ),
    ),
    "events.list": Route(
        "GET",
        "/integration/events",
        "event.list",
        (
            "type",
            "deliveryStatus",
            "after",
            "limit",
        ),
    ),
    "events.page": Route(
        "GET",
        "/integration/events",
        "event.list",
        (
            "type",
            "deliveryStatus",
            "after",
            "limit",
        ),
    ),
    "events.redeliver": Route(
        "POST", "/integration/events/{event_id}/redeliver", "event.redeliver"
    ),
    "facilitator.settle": Route("POST", "/x402/facilitator/settle", "facilitator.settle"),
    "facilitator.supported": Route("GET", "/x402/facilitator/supported", "facilitator.supported"),
    "facilitator.verify": Route("POST", "/x402/facilitator/verify", "facilitator.verify"),
    "fees.get": Route(
        "GET",
        "/integration/fees",
        "fee.get",
        (
            "chainId",
            "paymentAddress",
        ),
    ),
    "fees.set_fee": Route("POST", "/integration/fees/set-meta", "fee.set-meta"),
    "fees.set_payout": Route("POST", "/integration/fees/set-payout-meta", "fee.set-payout-meta"),
    "fees.set_refund_delegate": Route(
        "POST", "/integration/refund-delegate", "refund_delegate.set"
    ),
    "gasless.get": Route("GET", "/integration/gasless", "gasless.get", ("chainId",)),
    "gasless.set": Route("POST", "/integration/gasless", "gasless.set"),
    "invoices.capture": Route("POST", "/integration/invoices/capture", "invoice.capture"),
    "invoices.create": Route("POST", "/integration/invoices", "invoice.create"),
    "invoices.delete": Route(
        "DELETE",
        "/integration/invoices",
        "invoice.delete",
        (
            "chainId",
            "invoiceId",
        ),
    ),
    "invoices.list": Route(
        "GET",
        "/integration/invoices",
        "invoice.list",
        (
            "chainId",
            "status",
            "paid",
            "tokenAddress",
            "invoiceId",
            "page",
            "limit",
            "dateFrom",
            "dateTo",
        ),
    ),
    "invoices.page": Route(
        "GET",
        "/integration/invoices",
        "invoice.list",
        (
            "chainId",
            "status",
            "paid",
            "tokenAddress",
            "invoiceId",
            "page",
            "limit",
            "dateFrom",
            "dateTo",
        ),
    ),
    "invoices.refund": Route("POST", "/integration/invoices/refund-meta", "invoice.refund"),
    "invoices.service_refund": Route(
        "POST", "/integration/invoices/refund", "invoice.service_refund"
    ),
    "invoices.status": Route(
        "GET", "/integration/invoices/status", "invoice.status", ("paymentAddress",)
    ),
    "invoices.void": Route("POST", "/integration/invoices/void", "invoice.void"),
    "invoices.webhooks": Route(
        "GET", "/integration/invoices/webhooks", "invoice.webhooks", ("paymentAddress",)
    ),
    "members.add": Route("POST", "/integration/members", "member.add"),
    "members.list": Route("GET", "/integration/members", "member.list"),
    "members.remove": Route("DELETE", "/integration/members", "member.remove", ("address",)),
    "public.ask_receipt": Route("POST", "/pay/{payment_address}/receipt", None, ("lang",)),
    "public.authorize_subscription": Route(
        "POST", "/subscribe/{subscription_id}/authorization", None
    ),
    "public.cancel_subscription": Route("POST", "/subscribe/{subscription_id}/cancellation", None),
    "public.health": Route("GET", "/healthz", None),
    "public.pay_without_gas": Route("POST", "/pay/{payment_address}/authorization", None),
    "public.payment_page": Route("GET", "/pay/{payment_address}", None, ("lang",)),
    "public.payment_status": Route("GET", "/pay/{payment_address}/status", None),
    "public.ready": Route("GET", "/readyz", None),
    "public.relay_fee": Route("POST", "/fees/set-meta", None),
    "public.relay_payout": Route("POST", "/fees/set-payout-meta", None),
    "public.x402_requirements": Route("GET", "/pay/{payment_address}/x402", None),
    "reports.payments": Route(
        "GET",
        "/integration/reports/payments",
        "reports.payments",
        (
            "dateFrom",
            "dateTo",
            "currency",
            "format",
            "limit",
            "cursor",
        ),
    ),
    "settings.brand": Route("GET", "/integration/settings/brand", "brand.get"),
    "settings.get": Route("GET", "/integration/settings", "settings.get"),
    "settings.notifications": Route(
        "GET", "/integration/settings/notifications", "notifications.get"
    ),
    "settings.update": Route("PUT", "/integration/settings", "settings.update"),
    "settings.update_brand": Route("PUT", "/integration/settings/brand", "brand.update"),
    "settings.update_notifications": Route(
        "PUT", "/integration/settings/notifications", "notifications.update"
    ),
    "subscriptions.cancel": Route(
        "DELETE", "/integration/subscriptions", "subscription.cancel", ("id",)
    ),
    "subscriptions.create": Route("POST", "/integration/subscriptions", "subscription.create"),
    "subscriptions.list": Route(
        "GET",
        "/integration/subscriptions",
        "subscription.list",
        (
            "page",
            "limit",
        ),
    ),
    "subscriptions.status": Route(
        "GET", "/integration/subscriptions/status", "subscription.status", ("id",)
    ),
    "webhook_endpoints.create": Route(
        "POST", "/integration/webhook-endpoints", "webhook_endpoint.create"
    ),
    "webhook_endpoints.delete": Route(
        "DELETE", "/integration/webhook-endpoints", "webhook_endpoint.delete", ("id",)
    ),
    "webhook_endpoints.list": Route(
        "GET", "/integration/webhook-endpoints", "webhook_endpoint.list"
    ),
    "webhook_endpoints.test": Route(
        "POST", "/integration/webhook-endpoints/test", "webhook_endpoint.test", ("id",)
    ),
    "webhook_endpoints.update": Route(
        "PATCH", "/integration/webhook-endpoints", "webhook_endpoint.update", ("id",)
    ),
    "webhook_secrets.create": Route(
        "POST", "/integration/webhook-secrets", "webhook_secret.create"
    ),
    "webhook_secrets.list": Route("GET", "/integration/webhook-secrets", "webhook_secret.list"),
    "webhook_secrets.revoke": Route(
        "DELETE", "/integration/webhook-secrets", "webhook_secret.revoke", ("id",)
    ),
}
