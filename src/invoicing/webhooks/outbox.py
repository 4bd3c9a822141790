"""Writing paid events into the outbox, inside the paid transition's transaction."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.invoices.models import Invoice
from invoicing.invoices.views import webhook_payload
from invoicing.services import Services
from invoicing.webhooks.endpoints import endpoint_host, endpoint_key
from invoicing.webhooks.models import EventStatus, WebhookEvent


async def enqueue_paid_event(session: AsyncSession, services: Services, invoice: Invoice) -> None:
    """Queue the paid webhook for an invoice created with a webhookUrl (else nothing)."""
    if not invoice.webhook_url:
        return
    now_ms = services.clock.now_ms()
    session.add(
        WebhookEvent(
            id=str(uuid.uuid4()),
            invoice_pk=invoice.id,
            owner_key=invoice.owner_key,
            url=invoice.webhook_url,
            endpoint_key=endpoint_key(invoice.webhook_url),
            endpoint_host=endpoint_host(invoice.webhook_url),
            payload=webhook_payload(invoice),
            status=EventStatus.PENDING,
            attempts=0,
            next_attempt_at=now_ms,
            claimed_until=0,
            created_at=now_ms,
        )
    )
