"""Rows of the outbox (``models.WebhookEvent``), due now: one per delivery to make.

Two kinds share it: a webhook to an invoice's ``webhookUrl`` (the paid webhook, built
by ``invoices.notify`` in the paid transition's transaction, or copied by a redelivery) and
an event's envelope to one of the owner's endpoints (``record.write_events``, redeliveries
and pings).
"""

from __future__ import annotations

import uuid
from typing import Any

from invoicing.notifications.endpoints import endpoint_host, endpoint_key
from invoicing.notifications.models import Event, EventEndpoint, EventStatus


def webhook_url_row(
    owner_key: str,
    invoice_pk: str,
    url: str,
    payload: dict[str, Any],
    now_ms: int,
    event_id: str | None,
) -> dict[str, Any]:
    """``payload`` to an invoice's webhookUrl, ``webhook_max_attempts`` attempts; ``event_id``
    is the event it belongs to (the events API lists and redelivers it from there)."""
    row = _due_row(owner_key, invoice_pk, url, now_ms)
    row.update(payload=payload, event_id=event_id, endpoint_id=None)
    return row


def endpoint_delivery_row(
    event: Event, endpoint: EventEndpoint, now_ms: int, retry_until: int
) -> dict[str, Any]:
    """``event``'s envelope to ``endpoint``, retried until ``retry_until``."""
    row = _due_row(event.owner_key, event.invoice_pk, endpoint.url, now_ms)
    row.update(
        payload=event.envelope(),
        event_id=event.id,
        endpoint_id=endpoint.id,
        retry_until=retry_until,
    )
    return row


def _due_row(owner_key: str, invoice_pk: str | None, url: str, now_ms: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "invoice_pk": invoice_pk,
        "owner_key": owner_key,
        "url": url,
        "endpoint_key": endpoint_key(owner_key, url),
        "endpoint_host": endpoint_host(url),
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now_ms,
        "claimed_until": 0,
        "created_at": now_ms,
        "retry_until": None,
    }
