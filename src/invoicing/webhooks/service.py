"""Reading an invoice's webhook events and delivery attempts (for the listing route)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from invoicing.db import Database
from invoicing.invoices.service import find_by_payment_address
from invoicing.webhooks.models import WebhookAttempt, WebhookEvent


async def list_deliveries(db: Database, owner_key: str, payment_address: str) -> dict[str, Any]:
    """The owner's invoice's paid events and every attempt, oldest first; 404 if not theirs."""
    invoice = await find_by_payment_address(db, owner_key, payment_address)
    async with db.sessions() as session:
        events = list(
            await session.scalars(
                select(WebhookEvent)
                .where(
                    WebhookEvent.invoice_pk == invoice.id,
                    # The paid webhook only: events to endpoints are read per event.
                    WebhookEvent.endpoint_id.is_(None),
                )
                .order_by(WebhookEvent.created_at, WebhookEvent.id)
            )
        )
        attempts = list(
            await session.scalars(
                select(WebhookAttempt)
                .where(WebhookAttempt.event_id.in_([e.id for e in events]))
                .order_by(WebhookAttempt.attempted_at, WebhookAttempt.attempt, WebhookAttempt.id)
            )
        )
    return {
        "paymentAddress": invoice.payment_address,
        "events": [_event(event) for event in events],
        "items": [_attempt(attempt) for attempt in attempts],
    }


def _event(event: WebhookEvent) -> dict[str, Any]:
    return {
        "eventId": event.id,
        "status": event.status,
        "attempts": event.attempts,
        "nextAttemptAt": event.next_attempt_at if event.status == "pending" else None,
        "createdAt": event.created_at,
        "deliveredAt": event.delivered_at,
    }


def _attempt(attempt: WebhookAttempt) -> dict[str, Any]:
    return {
        "eventId": attempt.event_id,
        "attempt": attempt.attempt,
        "attemptedAt": attempt.attempted_at,
        "statusCode": attempt.status_code,
        "error": attempt.error,
        "durationMs": attempt.duration_ms,
    }
