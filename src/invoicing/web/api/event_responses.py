"""Response models of the notifications routes: events and their deliveries, webhook
endpoints, an invoice's paid-webhook log, webhook signing secrets and the owner's settings
(the conventions are in ``responses.py``)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field

from invoicing.notifications.service import (
    Attempt,
    DeliveryRecord,
    EventRecord,
    PaidWebhookLog,
    Queued,
)
from invoicing.notifications.signing import OwnerChoices
from invoicing.tables.notifications import EventEndpoint
from invoicing.web.api.responses import WireModel
from invoicing.web.routedocs import AddressOut, TimestampMs


class IssuedWebhookSecret(WireModel):
    """A new webhook signing secret; ``secret`` is shown this once."""

    id: str
    secret: str
    createdAt: TimestampMs


class WebhookSecret(WireModel):
    id: str
    createdAt: TimestampMs
    revokedAt: TimestampMs | None


class WebhookSecretList(WireModel):
    items: list[WebhookSecret]


class RevokedWebhookSecret(WireModel):
    revoked: Literal[True]
    id: str
    revokedAt: TimestampMs


class OwnerSettings(WireModel):
    """An owner's settings (defaults when never set)."""

    webhookApiKeyHeader: bool = Field(
        description="Whether paid webhooks carry x-service-api-key (API-key invoices)."
    )
    underpaymentToleranceBps: int = Field(
        ge=0,
        le=500,
        description="The share of the amount due (basis points) a payment may fall short by "
        "and still pay an invoice created from now on.",
    )
    reportingCurrency: str | None = Field(
        description="The ISO 4217 currency the dashboard shows values and totals in beside "
        "the token amounts (null: none chosen)."
    )
    captureWindowS: int = Field(
        description="How long a paid manual-capture invoice waits for its capture (seconds "
        "from paidAt)."
    )
    captureAtWindowEnd: bool = Field(
        description="At the end of the capture window: capture (true) or leave for a void."
    )

    @classmethod
    def of(cls, choices: OwnerChoices) -> Self:
        return cls(
            webhookApiKeyHeader=choices.webhook_api_key_header,
            underpaymentToleranceBps=choices.underpayment_tolerance_bps,
            reportingCurrency=choices.reporting_currency,
            captureWindowS=choices.capture_window_s,
            captureAtWindowEnd=choices.capture_at_window_end,
        )


class WebhookEvent(WireModel):
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


class WebhookAttempt(WireModel):
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


class WebhookLog(WireModel):
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


class EventEnvelope(WireModel):
    """An event as sent to webhook endpoints and listed by ``GET /integration/events``."""

    id: str
    type: str = Field(description="invoice.paid, invoice.partially_paid, … or ping.")
    createdAt: TimestampMs
    data: dict[str, Any] = Field(description='{"invoice": {…}} (ping: {"endpointId"}).')


class EventList(WireModel):
    items: list[EventEnvelope] = Field(description="Newest first.")
    hasMore: bool = Field(description="More, older events: ask again with after=<last id>.")


class EventDeliveryAttempt(WireModel):
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


class EventDelivery(WireModel):
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


class EventDetail(WireModel):
    event: EventEnvelope
    deliveries: list[EventDelivery] = Field(description="A page of them, oldest first.")
    hasMore: bool = Field(description="More, later deliveries: ask again with after=<last id>.")

    @classmethod
    def of(cls, record: EventRecord) -> Self:
        return cls(
            event=EventEnvelope.model_validate(record.envelope),
            deliveries=[EventDelivery.of(delivery) for delivery in record.deliveries],
            hasMore=record.has_more,
        )


class DeliveryAccepted(WireModel):
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


class WebhookEndpoint(WireModel):
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


class WebhookEndpointList(WireModel):
    items: list[WebhookEndpoint]


class DeletedWebhookEndpoint(WireModel):
    deleted: Literal[True]
    id: str
