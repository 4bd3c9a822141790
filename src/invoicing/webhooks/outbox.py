"""The spec's paid webhook as an outbox row, written in the paid transition's transaction
(by ``events.record.record_events``, with the move's events)."""

from __future__ import annotations

import uuid
from typing import Any

from invoicing.invoices.models import Invoice
from invoicing.invoices.views import webhook_payload
from invoicing.webhooks.endpoints import endpoint_host, endpoint_key
from invoicing.webhooks.models import EventStatus


def paid_webhook_row(invoice: Invoice, now_ms: int, event_id: str | None) -> dict[str, Any]:
    """The paid webhook (spec 6) to the invoice's webhookUrl, due now; ``event_id`` is its
    ``invoice.paid`` event (the events API lists and redelivers it from there)."""
    assert invoice.webhook_url is not None
    return {
        "id": str(uuid.uuid4()),
        "invoice_pk": invoice.id,
        "owner_key": invoice.owner_key,
        "url": invoice.webhook_url,
        "endpoint_key": endpoint_key(invoice.webhook_url),
        "endpoint_host": endpoint_host(invoice.webhook_url),
        "payload": webhook_payload(invoice),
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now_ms,
        "claimed_until": 0,
        "created_at": now_ms,
        "event_id": event_id,
        "endpoint_id": None,
        "retry_until": None,
    }
