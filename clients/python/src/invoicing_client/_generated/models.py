# Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.
"""The service's answers as typed models, one a schema of openapi.json
(``invoicing_client.models`` re-exports them beside the models the client adds)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "ApiKey",
    "ApiKeyList",
    "Brand",
    "Captured",
    "DeletedInvoice",
    "DeletedWebhookEndpoint",
    "DeliveryAccepted",
    "EscrowExportLine",
    "EventDelivery",
    "EventDeliveryAttempt",
    "EventDetail",
    "EventEnvelope",
    "EventPage",
    "FeeSettings",
    "FeeSubmission",
    "FiatPrice",
    "GaslessSettings",
    "GaslessSubmission",
    "Health",
    "Invoice",
    "InvoiceStatusResult",
    "InvoiceSubscription",
    "IssuedApiKey",
    "IssuedWebhookSecret",
    "MailSettings",
    "Member",
    "MemberList",
    "OtherBalance",
    "OwnerSettings",
    "PagePrice",
    "Payment",
    "PaymentLine",
    "PaymentReport",
    "PaymentStatus",
    "Readiness",
    "ReceiptRequested",
    "Refund",
    "RefundSubmission",
    "RemovedMember",
    "RevokedApiKey",
    "RevokedWebhookSecret",
    "ServiceRefundSubmission",
    "SettleResponse",
    "SubscriptionAuthorization",
    "SubscriptionCharge",
    "SubscriptionList",
    "SubscriptionOut",
    "SubscriptionResult",
    "SupportedKind",
    "SupportedResponse",
    "Tolerance",
    "VerifyResponse",
    "WebhookAttempt",
    "WebhookEndpoint",
    "WebhookEndpointList",
    "WebhookLog",
    "WebhookLogEvent",
    "WebhookSecret",
    "WebhookSecretList",
]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class ApiKey(_Model):
    id: str
    label: str | None
    created_at: int
    revoked_at: int | None


class ApiKeyList(_Model):
    items: list[ApiKey]


class Brand(_Model):
    """An owner's brand as the payment page shows it (every part null until set)."""

    display_name: str | None
    accent_color: str | None
    text_color: str | None
    logo_url: str | None


class Captured(_Model):
    """A captured invoice; a repeated capture gets the same answer."""

    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    capture: str
    captured_at: int


class DeletedInvoice(_Model):
    """Also the answer to a repeated DELETE of the same invoice."""

    deleted: bool
    invoice_id: str
    chain_id: int


class DeletedWebhookEndpoint(_Model):
    deleted: bool
    id: str


class DeliveryAccepted(_Model):
    """A delivery queued (redelivery, or a ping): its outcome shows in the event's detail."""

    event_id: str
    delivery_id: str
    endpoint_id: str | None
    status: str


class EscrowExportLine(_Model):
    """One line of the escrow export (NDJSON)."""

    payment_address: str
    salt: str
    token_address: str | None
    invoice_id: str
    status: str
    chain_id: int
    factory: str | None = None


class EventDeliveryAttempt(_Model):
    attempt: int
    attempted_at: int
    status_code: int | None
    error: str | None
    duration_ms: int


class EventDelivery(_Model):
    id: str
    endpoint_id: str | None
    target: str
    url: str
    status: str
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None
    attempts: list[EventDeliveryAttempt]


class EventEnvelope(_Model):
    """An event as sent to webhook endpoints and listed by ``GET /integration/events``."""

    id: str
    type: str
    created_at: int
    data: dict[str, Any]


class EventDetail(_Model):
    event: EventEnvelope
    deliveries: list[EventDelivery]
    has_more: bool


class EventPage(_Model):
    items: list[EventEnvelope]
    has_more: bool


class FeeSettings(_Model):
    """An owner's settings as the factory holds them."""

    fee_bps: int
    payout_address: str | None
    nonce: int
    factory: str | None = None


class FeeSubmission(_Model):
    """A relayed SetFee or SetPayout: the transaction that carries it."""

    tx_hash: str
    chain_id: int
    owner_address: str
    nonce: int
    status: str


class GaslessSettings(_Model):
    """Whether payers may pay the owner's invoices on the chain without gas; each such payment's
    gas counts against the owner's share of the relayer's daily budget."""

    chain_id: int
    enabled: bool
    tokens: list[str]


class GaslessSubmission(_Model):
    """The transaction that carries a payer's authorization: ``submitted`` while pending, then
    ``confirmed`` or ``failed``; the invoice shows paid once the payment is seen."""

    tx_hash: str
    chain_id: int
    payer: str
    nonce: str
    status: str


class Health(_Model):
    status: str


class FiatPrice(_Model):
    """The fiat price locked into the invoice at creation (docs: Pricing)."""

    currency: str
    amount: str
    rate: str
    source: str
    feed: str | None = None
    round_id: int | None = None
    round_updated_at: int | None = None


class OtherBalance(_Model):
    """An asset in the escrow other than the invoice's own, not swept yet."""

    token_address: str | None
    balance_raw: int


class Payment(_Model):
    """A transfer into the invoice's escrow, as the chain shows it (docs: Invoices)."""

    tx_hash: str
    from_: str = Field(alias="from")
    amount_raw: int
    token_address: str | None
    block_number: int


class Refund(_Model):
    """A relayed refund from the invoice's escrow."""

    tx_hash: str | None
    to: str
    token_address: str | None
    amount_raw: int
    status: str
    created_at: int


class InvoiceSubscription(_Model):
    id: str
    period: int


class Tolerance(_Model):
    """The owner's underpayment tolerance when the invoice was created (docs: Pricing)."""

    bps: int
    minimum_raw: int
    accepted_under: bool
    shortfall_raw: int


class Invoice(_Model):
    """The Invoice object, plus the escrow's ``salt`` and, when there are some, its ``refunds``,
    ``otherBalances``, fiat price and tolerance."""

    id: str
    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str | None = None
    amount: str
    token_address: str | None
    expires_at: int
    status: str
    paid: bool
    paid_at: int | None
    withdrawn: bool
    withdrawn_at: int | None
    required_raw: int
    balance_raw: int
    meta_balance: str
    last_checked_at: int | None = None
    created_at: int
    updated_at: int
    url: str
    capture: str = "automatic"
    cancel_url: str | None = None
    captured_at: int | None = None
    description: str | None = None
    fiat: FiatPrice | None = None
    metadata: dict[str, Any] | None = None
    other_balances: list[OtherBalance] | None = None
    payments: list[Payment] | None = None
    redirect_url: str | None = None
    refunds: list[Refund] | None = None
    subscription: InvoiceSubscription | None = None
    tolerance: Tolerance | None = None
    voided_at: int | None = None
    x402_url: str | None = None


class InvoiceStatusResult(_Model):
    invoice: Invoice


class IssuedApiKey(_Model):
    """A new API key; ``apiKey`` is shown this once."""

    id: str
    api_key: str
    label: str | None
    created_at: int


class IssuedWebhookSecret(_Model):
    """A new webhook signing secret; ``secret`` is shown this once."""

    id: str
    secret: str
    created_at: int


class MailSettings(_Model):
    """The events mailed to an owner, and where."""

    email: str | None
    events: list[str]
    language: str
    receipts: bool


class Member(_Model):
    """A wallet that acts on the owner's account in the dashboard, within its role."""

    address: str
    role: str
    created_at: int
    updated_at: int


class MemberList(_Model):
    items: list[Member]


class OwnerSettings(_Model):
    """An owner's settings (defaults when never set)."""

    webhook_api_key_header: bool
    underpayment_tolerance_bps: int = 0
    reporting_currency: str | None = None
    capture_window_s: int | None = None
    capture_at_window_end: bool | None = None


class PaymentLine(_Model):
    """One payment (amounts as decimal strings in the token's units; unknown: empty)."""

    invoice_id: str
    payment_address: str
    chain_id: int
    token: str
    amount: str
    paid_at: int
    tx_hash: str
    from_: str = Field(alias="from")
    fiat_currency: str
    fiat_amount: str
    rate: str
    fee: str
    sweep_tx_hash: str


class PaymentReport(_Model):
    items: list[PaymentLine]
    next_cursor: str | None


class PagePrice(_Model):
    """The fiat price an invoice was created with (docs/integration/pricing.md)."""

    currency: str
    amount: str
    rate: str


class PaymentStatus(_Model):
    """``GET /pay/<paymentAddress>/status``: what the hosted payment page shows (public, no
    owner data): the fields the page renders, built by ``PaymentView.public_status``."""

    payment_address: str
    chain_id: int
    network: str
    token_address: str | None
    symbol: str
    decimals: int
    amount: str
    required_raw: int
    balance_raw: int
    remaining_raw: int
    remaining: str
    payment_uri: str
    status: str
    expires_at: int
    paid_at: int | None
    description: str | None
    fiat: PagePrice | None = None


class Readiness(_Model):
    """200 when every check passes (a relayer short of funds is ``degraded``), else 503."""

    ready: bool
    checks: dict[str, str]
    degraded: dict[str, str] | None = None


class ReceiptRequested(_Model):
    """The receipt will be mailed to ``email`` once the invoice is paid."""

    email: str


class RefundSubmission(_Model):
    """A relayed Refund: the transaction that carries it."""

    tx_hash: str
    chain_id: int
    owner_address: str
    nonce: int
    status: str


class RemovedMember(_Model):
    removed: bool
    address: str


class RevokedApiKey(_Model):
    revoked: bool
    id: str
    revoked_at: int


class RevokedWebhookSecret(_Model):
    revoked: bool
    id: str
    revoked_at: int


class ServiceRefundSubmission(_Model):
    """A Refund the service signed as the owner's delegate and relayed."""

    tx_hash: str
    chain_id: int
    owner_address: str
    nonce: int
    status: str
    to: str
    amount_raw: int


class SettleResponse(_Model):
    """x402 v2 SettleResponse (``transaction`` empty when nothing was settled)."""

    success: bool
    payer: str
    transaction: str
    network: str
    error_reason: str | None = None


class SubscriptionAuthorization(_Model):
    spender: str
    typed_data: dict[str, Any]


class SubscriptionCharge(_Model):
    period: int
    payment_address: str
    status: str
    charge_status: str | None
    tx_hash: str | None


class SubscriptionOut(_Model):
    id: str
    subscription_id: str | None
    owner_address: str
    chain_id: int
    token_address: str
    amount: str
    amount_raw: int
    period_seconds: int
    max_periods: int
    status: str
    url: str
    payer: str | None
    next_charge_at: int | None
    description: str | None
    authorization: SubscriptionAuthorization
    charges: list[SubscriptionCharge]
    created_at: int
    webhook_url: str | None = None


class SubscriptionList(_Model):
    items: list[SubscriptionOut]
    total: int
    page: int
    limit: int


class SubscriptionResult(_Model):
    subscription: SubscriptionOut


class SupportedKind(_Model):
    x402_version: int
    scheme: str
    network: str


class SupportedResponse(_Model):
    """x402 v2 SupportedResponse: the exact scheme per chain, and the relayers' addresses."""

    kinds: list[SupportedKind]
    extensions: list[str]
    signers: dict[str, list[str]]


class VerifyResponse(_Model):
    """x402 v2 VerifyResponse."""

    is_valid: bool
    payer: str
    invalid_reason: str | None = None


class WebhookEndpoint(_Model):
    id: str
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    disabled_reason: str | None
    disabled_at: int | None
    failing_since: int | None
    created_at: int
    updated_at: int


class WebhookEndpointList(_Model):
    items: list[WebhookEndpoint]


class WebhookLogEvent(_Model):
    """A paid webhook's delivery (``eventId``: the ``x-service-event-id`` it is sent with)."""

    event_id: str
    status: str
    attempts: int
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None


class WebhookAttempt(_Model):
    """One attempt of a paid webhook's delivery (the same attempt as an event's detail shows,
    with the delivery's id)."""

    event_id: str
    attempt: int
    attempted_at: int
    status_code: int | None
    error: str | None
    duration_ms: int | None


class WebhookLog(_Model):
    """An invoice's paid-webhook events and every delivery attempt, oldest first."""

    payment_address: str
    events: list[WebhookLogEvent]
    items: list[WebhookAttempt]


class WebhookSecret(_Model):
    id: str
    created_at: int
    revoked_at: int | None


class WebhookSecretList(_Model):
    items: list[WebhookSecret]
