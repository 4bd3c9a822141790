"""The response models: each documents its routes' 2xx body in ``openapi.json``
(``documented(ok=...)``) and is what writes it (``Answer``, web/routedocs.py), so each resource
has one wire shape. The domain hands over typed values (rows, records); ``of`` builds a model
from one. Two bodies are also what the domain sends elsewhere, so the domain builds them and
the model checks and writes them: the Invoice object (``invoices.views``, also every event's
``data.invoice``) and the event envelope (also the body of a delivery). ``extra="forbid"``:
an undocumented field is refused rather than sent.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from invoicing.fees.service import OwnerFees
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.notifications.models import EventEndpoint
from invoicing.notifications.service import (
    Attempt,
    DeliveryRecord,
    EventRecord,
    PaidWebhookLog,
    Queued,
)
from invoicing.notifications.signing import OwnerChoices
from invoicing.settlement.signed_relay import Accepted
from invoicing.web.routedocs import (
    AddressOut,
    DecimalAmount,
    Hex32,
    RawAmount,
    TimestampMs,
    TxHash,
    Uint256String,
)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Refund(_Out):
    """A relayed refund from the invoice's escrow."""

    txHash: TxHash | None
    to: AddressOut
    tokenAddress: AddressOut | None = Field(description="null: the native coin.")
    amountRaw: RawAmount
    status: str = Field(description="submitted, confirmed or failed.")
    createdAt: TimestampMs


class OtherBalance(_Out):
    """An asset in the escrow other than the invoice's own, not swept yet."""

    tokenAddress: AddressOut | None = Field(description="null: the native coin.")
    balanceRaw: RawAmount


class Invoice(_Out):
    """The Invoice object (spec 2.1), plus the escrow's ``salt`` and, when there are some,
    its ``refunds`` and ``otherBalances``."""

    id: str
    ownerAddress: AddressOut
    chainId: int
    invoiceId: str
    paymentAddress: AddressOut
    salt: Hex32
    amount: DecimalAmount
    tokenAddress: AddressOut | None = Field(description="null: the chain's native coin.")
    description: str | None = Field(default=None, description="Present only when given.")
    metadata: dict[str, Any] | None = Field(default=None, description="Present only when given.")
    expiresAt: TimestampMs
    status: InvoiceStatus
    paid: bool
    paidAt: TimestampMs | None
    withdrawn: bool
    withdrawnAt: TimestampMs | None
    requiredRaw: RawAmount
    balanceRaw: RawAmount
    metaBalance: DecimalAmount
    lastCheckedAt: TimestampMs
    createdAt: TimestampMs
    updatedAt: TimestampMs
    url: str = Field(description="The hosted payment page.")
    refunds: list[Refund] | None = Field(default=None, description="Present only when any.")
    otherBalances: list[OtherBalance] | None = Field(
        default=None, description="Present only when any."
    )


class InvoiceStatusResult(_Out):
    invoice: Invoice


class InvoiceList(_Out):
    """A page of invoices (spec 2.3); everything is read when page * limit >= total."""

    items: list[Invoice]
    total: int = Field(ge=0)
    page: int = Field(ge=1)
    limit: int = Field(ge=1, le=100)


class DeleteResult(_Out):
    """Also the answer to a repeated DELETE of the same invoice."""

    deleted: Literal[True]
    invoiceId: str
    chainId: int


class IssuedApiKey(_Out):
    """A new API key; ``apiKey`` is shown this once."""

    id: str
    apiKey: str
    label: str | None
    createdAt: TimestampMs


class ApiKey(_Out):
    id: str
    label: str | None
    createdAt: TimestampMs
    revokedAt: TimestampMs | None


class ApiKeyList(_Out):
    items: list[ApiKey]


class RevokedApiKey(_Out):
    revoked: Literal[True]
    id: str
    revokedAt: TimestampMs


class IssuedWebhookSecret(_Out):
    """A new webhook signing secret; ``secret`` is shown this once."""

    id: str
    secret: str
    createdAt: TimestampMs


class WebhookSecret(_Out):
    id: str
    createdAt: TimestampMs
    revokedAt: TimestampMs | None


class WebhookSecretList(_Out):
    items: list[WebhookSecret]


class RevokedWebhookSecret(_Out):
    revoked: Literal[True]
    id: str
    revokedAt: TimestampMs


class OwnerSettings(_Out):
    """An owner's settings (defaults when never set)."""

    webhookApiKeyHeader: bool = Field(
        description="Whether paid webhooks carry x-service-api-key (API-key invoices)."
    )

    @classmethod
    def of(cls, choices: OwnerChoices) -> Self:
        return cls(webhookApiKeyHeader=choices.webhook_api_key_header)


class FeeSettings(_Out):
    """An owner's settings as the factory holds them."""

    feeBps: int = Field(ge=0, le=500)
    payoutAddress: AddressOut | None
    nonce: Uint256String
    factory: AddressOut = Field(
        description="The factory contract SetFee and SetPayout signatures are made for "
        "(the EIP-712 domain's verifyingContract)."
    )

    @classmethod
    def of(cls, fees: OwnerFees) -> Self:
        return cls(
            feeBps=fees.fee_bps,
            payoutAddress=fees.payout_address,
            nonce=str(fees.nonce),
            factory=fees.factory,
        )


class FeeSubmission(_Out):
    """A relayed SetFee or SetPayout: the transaction that carries it."""

    txHash: TxHash
    chainId: int
    ownerAddress: AddressOut
    nonce: Uint256String
    status: Literal["submitted"]

    @classmethod
    def of(cls, accepted: Accepted) -> Self:
        return cls(
            txHash=accepted.tx_hash,
            chainId=accepted.chain_id,
            ownerAddress=accepted.signer_address,
            nonce=str(accepted.nonce),
            status="submitted",
        )


class RefundSubmission(FeeSubmission):
    """A relayed Refund: the transaction that carries it."""


class WebhookEvent(_Out):
    """A paid webhook's delivery (``eventId``: the ``x-service-event-id`` it is sent with)."""

    eventId: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int = Field(ge=0)
    nextAttemptAt: TimestampMs | None
    createdAt: TimestampMs
    deliveredAt: TimestampMs | None

    @classmethod
    def of(cls, delivery: DeliveryRecord) -> Self:
        return cls.model_validate(
            {
                "eventId": delivery.id,
                "status": delivery.status,
                "attempts": delivery.attempt_count,
                "nextAttemptAt": delivery.next_attempt_at,
                "createdAt": delivery.created_at,
                "deliveredAt": delivery.delivered_at,
            }
        )


class WebhookAttempt(_Out):
    """One attempt of a paid webhook's delivery (the same attempt as an event's detail
    shows, with the delivery's id)."""

    eventId: str
    attempt: int = Field(ge=1)
    attemptedAt: TimestampMs
    statusCode: int | None
    error: str | None
    durationMs: int | None

    @classmethod
    def of(cls, attempt: Attempt) -> Self:
        return cls(eventId=attempt.delivery_id, **_attempt_fields(attempt))


class WebhookLog(_Out):
    """An invoice's paid-webhook events and every delivery attempt, oldest first."""

    paymentAddress: AddressOut
    events: list[WebhookEvent]
    items: list[WebhookAttempt]

    @classmethod
    def of(cls, log: PaidWebhookLog) -> Self:
        return cls(
            paymentAddress=log.payment_address,
            events=[WebhookEvent.of(delivery) for delivery in log.deliveries],
            items=[WebhookAttempt.of(attempt) for attempt in log.attempts],
        )


class EscrowExportLine(_Out):
    """One line of the escrow export (NDJSON)."""

    paymentAddress: AddressOut
    salt: Hex32
    tokenAddress: AddressOut | None
    invoiceId: str
    status: InvoiceStatus
    chainId: int


class Health(_Out):
    status: Literal["ok"]


class Readiness(_Out):
    """200 when every check passes (a relayer short of funds is ``degraded``), else 503."""

    ready: bool
    checks: dict[str, str]
    degraded: dict[str, str] | None = Field(default=None, description="Present only when any.")


class EventEnvelope(_Out):
    """An event as sent to webhook endpoints and listed by ``GET /integration/events``."""

    id: str
    type: str = Field(description="invoice.paid, invoice.partially_paid, … or ping.")
    createdAt: TimestampMs
    data: dict[str, Any] = Field(description='{"invoice": {…}} (ping: {"endpointId"}).')


class EventList(_Out):
    items: list[EventEnvelope] = Field(description="Newest first.")
    hasMore: bool = Field(description="More, older events: ask again with after=<last id>.")


class EventDeliveryAttempt(_Out):
    attempt: int
    attemptedAt: TimestampMs
    statusCode: int | None
    error: str | None
    durationMs: int

    @classmethod
    def of(cls, attempt: Attempt) -> Self:
        return cls(**_attempt_fields(attempt))


def _attempt_fields(attempt: Attempt) -> dict[str, Any]:
    return {
        "attempt": attempt.attempt,
        "attemptedAt": attempt.attempted_at,
        "statusCode": attempt.status_code,
        "error": attempt.error,
        "durationMs": attempt.duration_ms,
    }


class EventDelivery(_Out):
    id: str
    endpointId: str | None
    target: Literal["endpoint", "webhookUrl"]
    url: str
    status: str = Field(description="pending, delivered or failed.")
    nextAttemptAt: TimestampMs | None
    createdAt: TimestampMs
    deliveredAt: TimestampMs | None
    attempts: list[EventDeliveryAttempt]

    @classmethod
    def of(cls, delivery: DeliveryRecord) -> Self:
        return cls.model_validate(
            {
                "id": delivery.id,
                "endpointId": delivery.endpoint_id,
                "target": "endpoint" if delivery.endpoint_id is not None else "webhookUrl",
                "url": delivery.url,
                "status": delivery.status,
                "nextAttemptAt": delivery.next_attempt_at,
                "createdAt": delivery.created_at,
                "deliveredAt": delivery.delivered_at,
                "attempts": [EventDeliveryAttempt.of(attempt) for attempt in delivery.attempts],
            }
        )


class EventDetail(_Out):
    event: EventEnvelope
    deliveries: list[EventDelivery] = Field(description="Oldest first.")

    @classmethod
    def of(cls, record: EventRecord) -> Self:
        return cls(
            event=EventEnvelope.model_validate(record.envelope),
            deliveries=[EventDelivery.of(delivery) for delivery in record.deliveries],
        )


class DeliveryAccepted(_Out):
    """A delivery queued (redelivery, or a ping): its outcome shows in the event's detail."""

    eventId: str
    deliveryId: str
    endpointId: str | None
    status: Literal["pending"]

    @classmethod
    def of(cls, queued: Queued) -> Self:
        return cls(
            eventId=queued.event_id,
            deliveryId=queued.delivery_id,
            endpointId=queued.endpoint_id,
            status="pending",
        )


class WebhookEndpoint(_Out):
    id: str
    url: str
    events: list[str] = Field(description='Event types, or ["*"] for all.')
    description: str | None
    enabled: bool
    disabledReason: str | None
    disabledAt: TimestampMs | None
    failingSince: TimestampMs | None
    createdAt: TimestampMs
    updatedAt: TimestampMs

    @classmethod
    def of(cls, endpoint: EventEndpoint) -> Self:
        return cls(
            id=endpoint.id,
            url=endpoint.url,
            events=endpoint.events,
            description=endpoint.description,
            enabled=endpoint.enabled,
            disabledReason=endpoint.disabled_reason,
            disabledAt=endpoint.disabled_at,
            failingSince=endpoint.failing_since,
            createdAt=endpoint.created_at,
            updatedAt=endpoint.updated_at,
        )


class WebhookEndpointList(_Out):
    items: list[WebhookEndpoint]


class DeletedWebhookEndpoint(_Out):
    deleted: Literal[True]
    id: str
