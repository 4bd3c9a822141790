"""Writing events inside the transaction of the move that causes them, with their deliveries.

Callers collect the moves of one transaction (``invoices.lifecycle.apply_step`` returns each
move's events) and call :func:`record_events` once: the owners' endpoints are read in one
query, and events and deliveries go in with one multi-row INSERT each, so a monitor pass
that pays a thousand invoices pays for three statements, not three thousand.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.events.models import Event, EventEndpoint
from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.invoices.models import Invoice
from invoicing.invoices.views import invoice_to_dict
from invoicing.settings import Settings
from invoicing.webhooks.endpoints import endpoint_host, endpoint_key
from invoicing.webhooks.models import EventStatus, WebhookEvent
from invoicing.webhooks.outbox import paid_webhook_row


@dataclass(frozen=True)
class Occurrence:
    """What one move of one invoice writes: its events, whether the spec's paid webhook goes
    out (``notify_paid``, the ``NOTIFY_PAID`` effect) and anything the events' ``data``
    carries besides the invoice (the refund of ``invoice.refunded``)."""

    invoice: Invoice
    types: Sequence[str]
    notify_paid: bool = False
    extra: dict[str, Any] | None = None


async def record_events(
    session: AsyncSession, settings: Settings, now_ms: int, occurrences: Sequence[Occurrence]
) -> list[Event]:
    """Write the events of ``occurrences``, a delivery to every enabled endpoint of the owner
    that takes the event's type, and the paid webhooks; returns the events."""
    occurrences = [o for o in occurrences if o.types or o.notify_paid]
    if not occurrences:
        return []
    views = await _owner_views(session, settings, [o.invoice for o in occurrences])
    events: list[Event] = []
    paid_event_of: dict[str, str] = {}
    for occurrence, view in zip(occurrences, views, strict=True):
        for event_type in occurrence.types:
            data = {"invoice": view, **(occurrence.extra or {})}
            event = new_event(occurrence.invoice.owner_key, event_type, now_ms, data)
            event.invoice_pk = occurrence.invoice.id
            events.append(event)
            if event_type == InvoiceEvent.PAID:
                paid_event_of[occurrence.invoice.id] = event.id
    deliveries = await _endpoint_deliveries(session, settings, events, now_ms)
    for occurrence in occurrences:
        invoice = occurrence.invoice
        if occurrence.notify_paid and invoice.webhook_url:
            deliveries.append(paid_webhook_row(invoice, now_ms, paid_event_of.get(invoice.id)))
    if events:
        await session.execute(insert(Event), [_event_row(event) for event in events])
    if deliveries:
        await session.execute(insert(WebhookEvent), deliveries)
    return events


def new_event(owner_key: str, event_type: str, now_ms: int, data: dict[str, Any]) -> Event:
    return Event(
        id=str(uuid.uuid4()), owner_key=owner_key, type=event_type, created_at=now_ms, data=data
    )


def endpoint_delivery_row(
    event: Event, endpoint: EventEndpoint, now_ms: int, retry_until: int
) -> dict[str, Any]:
    """An outbox row sending ``event``'s envelope to ``endpoint``, due now."""
    return {
        "id": str(uuid.uuid4()),
        "invoice_pk": event.invoice_pk,
        "owner_key": event.owner_key,
        "url": endpoint.url,
        "endpoint_key": endpoint_key(endpoint.url),
        "endpoint_host": endpoint_host(endpoint.url),
        "payload": event.envelope(),
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now_ms,
        "claimed_until": 0,
        "created_at": now_ms,
        "event_id": event.id,
        "endpoint_id": endpoint.id,
        "retry_until": retry_until,
    }


async def _endpoint_deliveries(
    session: AsyncSession, settings: Settings, events: list[Event], now_ms: int
) -> list[dict[str, Any]]:
    if not events:
        return []
    owners = sorted({event.owner_key for event in events})
    endpoints: dict[str, list[EventEndpoint]] = defaultdict(list)
    for endpoint in await session.scalars(
        select(EventEndpoint)
        .where(EventEndpoint.owner_key.in_(owners), EventEndpoint.enabled.is_(True))
        .order_by(EventEndpoint.created_at, EventEndpoint.id)
    ):
        endpoints[endpoint.owner_key].append(endpoint)
    retry_until = now_ms + int(settings.event_retry_window_s * 1000)
    return [
        endpoint_delivery_row(event, endpoint, now_ms, retry_until)
        for event in events
        for endpoint in endpoints.get(event.owner_key, ())
        if endpoint.receives(event.type)
    ]


async def _owner_views(
    session: AsyncSession, settings: Settings, invoices: list[Invoice]
) -> list[dict[str, Any]]:
    """The owner representation of each invoice as the move left it (``api.invoices
    .owner_views``: spec 2.1 with ``salt``, ``refunds`` and ``otherBalances``)."""
    # Imported here: refunds and settlement record events themselves.
    from invoicing.refunds.service import refunds_in
    from invoicing.settlement.assets import other_balances_in

    with_extras = sorted({invoice.id for invoice in invoices if invoice.has_extras})
    refunds: dict[str, list[dict[str, Any]]] = {}
    others: dict[str, list[dict[str, Any]]] = {}
    if with_extras:
        refunds = await refunds_in(session, with_extras)
        others = await other_balances_in(session, with_extras)
    return [
        invoice_to_dict(
            invoice,
            settings.payment_page_url,
            refunds=refunds.get(invoice.id),
            other_balances=others.get(invoice.id),
        )
        for invoice in invoices
    ]


def _event_row(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "owner_key": event.owner_key,
        "type": event.type,
        "invoice_pk": event.invoice_pk,
        "created_at": event.created_at,
        "data": event.data,
    }
