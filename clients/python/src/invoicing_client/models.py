"""What the service returns, as typed models with snake_case attributes.

One rule for numbers, the same in the JavaScript SDK (docs/integration/sdks.md): an amount
in the token's units (``amount``, ``meta_balance``, ``remaining``) is a decimal string, never
a float; an amount in raw units (``*_raw``: wei, or the token's smallest unit) and a nonce
are integers (``int``; ``bigint`` in JavaScript), read from the service's decimal strings.
Timestamps are unix milliseconds. Fields added by newer service versions are ignored rather
than refused. ``tests/unit/test_sdk_coverage.py`` checks every model against the service's
``openapi.json``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class Refund(_Model):
    """A relayed refund of an invoice's escrow."""

    tx_hash: str | None
    to: str
    token_address: str | None
    amount_raw: int
    status: str
    created_at: int


class OtherBalance(_Model):
    """What an escrow holds of an asset other than the invoice's own."""

    token_address: str | None
    balance_raw: int


class FiatPrice(_Model):
    """The fiat price locked into an invoice at creation: ``amount`` of ``currency`` at
    ``rate`` (units of the currency per whole unit of the asset), from a 1:1 ``peg`` or a
    ``chainlink`` feed (then its address, round and the round's time)."""

    currency: str
    amount: str
    rate: str
    source: str
    feed: str | None = None
    round_id: int | None = None
    round_updated_at: int | None = None


class Tolerance(_Model):
    """The underpayment the owner accepted for an invoice: ``bps`` of ``required_raw``, so
    ``minimum_raw`` pays it; ``accepted_under`` once paid with less, short by
    ``shortfall_raw``."""

    bps: int
    minimum_raw: int
    accepted_under: bool
    shortfall_raw: int


class Invoice(_Model):
    """An invoice as its owner sees it."""

    id: str
    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str | None = None
    amount: str
    token_address: str | None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    redirect_url: str | None = None
    cancel_url: str | None = None
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
    x402_url: str | None = None  # only for an invoice in a token with EIP-3009
    fiat: FiatPrice | None = None
    tolerance: Tolerance | None = None
    refunds: list[Refund] | None = None
    other_balances: list[OtherBalance] | None = None


class CreatedInvoice(Invoice):
    """An invoice as ``invoices.create`` returns it.

    ``created`` is False when the service already held this invoice (an identical earlier
    create of the same ``invoice_id``: a safe retry). In signature mode
    ``request_signature`` is the ``x-service-signature`` of the request that created it,
    which the paid webhook carries back; None in API-key mode, and when the invoice was
    created by an earlier call (then the webhook carries that call's signature)."""

    created: bool = True
    request_signature: str | None = None


class DeletedInvoice(_Model):
    deleted: bool
    invoice_id: str
    chain_id: int


class FeeSettings(_Model):
    """An owner's settings as the factory holds them (``nonce`` is the next one to sign)."""

    fee_bps: int
    payout_address: str | None
    nonce: int
    factory: str | None = None


class FeeSubmission(_Model):
    """A relayed SetFee/SetPayout: the transaction carrying it (202 from the service)."""

    tx_hash: str
    chain_id: int
    owner_address: str
    nonce: int
    status: str


class RefundSubmission(FeeSubmission):
    """A relayed Refund: the transaction carrying it (202 from the service)."""


class ApiKey(_Model):
    """An API key as listed (never with its secret)."""

    id: str
    label: str | None
    created_at: int
    revoked_at: int | None = None


class IssuedApiKey(_Model):
    """A new API key; ``api_key`` is shown this once and cannot be read again."""

    id: str
    api_key: str
    label: str | None
    created_at: int


class RevokedApiKey(_Model):
    revoked: bool
    id: str
    revoked_at: int


class WebhookEvent(_Model):
    """The paid webhook's body (docs/integration/webhooks.md), once verified by
    ``webhooks.verify``.

    ``balance`` is the one JSON number of the body, kept as the service sent it; use
    ``balance_raw`` (an exact integer) for arithmetic."""

    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str | None = None
    amount: str
    token_address: str | None
    status: str
    paid: bool
    paid_at: int
    required_raw: int
    balance_raw: int
    balance: float | int | str
    updated_at: int
    # Set from the headers: stable across retries of one event, for de-duplication.
    event_id: str | None = None


class WebhookSecret(_Model):
    """A webhook signing secret as listed (never the secret itself)."""

    id: str
    created_at: int
    revoked_at: int | None


class IssuedWebhookSecret(_Model):
    """A new signing secret (``whsec_…``); shown this once."""

    id: str
    secret: str
    created_at: int


class RevokedWebhookSecret(_Model):
    revoked: bool
    id: str
    revoked_at: int


class WebhookEndpoint(_Model):
    """A registered endpoint for events; disabled by the service after failing too long."""

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


class DeletedWebhookEndpoint(_Model):
    deleted: bool
    id: str


class DeliveryAccepted(_Model):
    """A delivery queued by ``webhook_endpoints.test`` or ``events.redeliver`` (202)."""

    event_id: str
    delivery_id: str
    endpoint_id: str | None
    status: str


class EventEnvelope(_Model):
    """An event: ``{id, type, createdAt, data}``, as ``events`` list it and as a registered
    webhook endpoint receives it (``webhooks.verify``)."""

    id: str
    type: str
    created_at: int
    data: dict[str, Any]


class EventPage(_Model):
    items: list[EventEnvelope]
    has_more: bool


class EventDeliveryAttempt(_Model):
    attempt: int
    attempted_at: int
    status_code: int | None
    error: str | None
    duration_ms: int


class EventDelivery(_Model):
    """One target of an event (an endpoint, or the invoice's webhookUrl) and its attempts."""

    id: str
    endpoint_id: str | None
    target: str
    url: str
    status: str
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None
    attempts: list[EventDeliveryAttempt]


class EventDetail(_Model):
    """An event and one page of its deliveries, oldest first (``has_more``: more follow)."""

    event: EventEnvelope
    deliveries: list[EventDelivery]
    has_more: bool


class WebhookLogEvent(_Model):
    """One paid-webhook event of an invoice, with its delivery state."""

    event_id: str
    status: str
    attempts: int
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None


class WebhookAttempt(_Model):
    event_id: str
    attempt: int
    attempted_at: int
    status_code: int | None
    error: str | None
    duration_ms: int | None


class WebhookLog(_Model):
    """The paid webhook's events and delivery attempts of one invoice."""

    payment_address: str
    events: list[WebhookLogEvent]
    items: list[WebhookAttempt]


class EscrowExportLine(_Model):
    """One escrow with its salt: enough to recover its funds without the service."""

    payment_address: str
    salt: str
    token_address: str | None
    invoice_id: str
    status: str
    chain_id: int
    # The factory that made the escrow and sweeps it (a previous version's, for an escrow
    # made before an upgrade); None from a server that does not name it.
    factory: str | None = None


class OwnerSettings(_Model):
    webhook_api_key_header: bool
    underpayment_tolerance_bps: int = 0


class Brand(_Model):
    """What the payment page shows of the owner (each part None until set)."""

    display_name: str | None
    accent_color: str | None
    text_color: str | None
    logo_url: str | None


class GaslessSettings(_Model):
    """Whether payers may pay the owner's invoices on a chain without gas, and the chain's
    tokens that allow it (EIP-3009)."""

    chain_id: int
    enabled: bool
    tokens: list[str]


class VerifyResponse(_Model):
    """x402 v2 VerifyResponse (this service as a facilitator)."""

    is_valid: bool
    invalid_reason: str | None = None
    payer: str


class SettleResponse(_Model):
    """x402 v2 SettleResponse (``transaction`` empty when nothing was settled)."""

    success: bool
    error_reason: str | None = None
    payer: str
    transaction: str
    network: str


class SupportedKind(_Model):
    x402_version: int
    scheme: str
    network: str


class SupportedResponse(_Model):
    kinds: list[SupportedKind]
    extensions: list[str]
    signers: dict[str, list[str]]


class GaslessSubmission(_Model):
    """A payer's transfer authorization, relayed: the transaction carrying it (202)."""

    tx_hash: str
    chain_id: int
    payer: str
    nonce: str  # 0x + 64 hex digits (EIP-3009 nonces are random)
    status: str


class PagePrice(_Model):
    """The fiat price a payment page shows: ``amount`` of ``currency`` at ``rate``."""

    currency: str
    amount: str
    rate: str


class PaymentStatus(_Model):
    """The public status of a payment page (what a payer's browser reads)."""

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


class Health(_Model):
    status: str


class Readiness(_Model):
    """``ready`` is False (HTTP 503) when a check failed; ``degraded`` names a chain whose
    relayer is short of funds (still ready)."""

    ready: bool
    checks: dict[str, str]
    degraded: dict[str, str] | None = None
