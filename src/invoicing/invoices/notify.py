"""An invoice's moves as events, written inside the transaction of the move that causes them.

Callers collect the moves of one transaction (``invoices.lifecycle.apply_step`` returns each
move's events) and call :func:`record_events` once: each event carries the owner's view of
the invoice as the move left it (``invoices.owner_view``), and a move with the
``NOTIFY_PAID`` effect also queues the paid webhook to the invoice's ``webhookUrl``.
``notifications.record`` then writes events and deliveries with one multi-row INSERT each,
so a monitor pass that pays a thousand invoices pays for a handful of statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.config import x402_tokens
from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.invoices.owner_view import owner_views
from invoicing.invoices.payments import PAID_WEBHOOK_HOLD_MS
from invoicing.invoices.views import webhook_payload
from invoicing.notifications.outbox import webhook_url_row
from invoicing.notifications.record import new_event, write_events
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event


@dataclass(frozen=True)
class Occurrence:
    """What one move of one invoice writes: its events, whether the paid webhook goes
    out (``notify_paid``, the ``NOTIFY_PAID`` effect) and anything the events' ``data``
    carries besides the invoice (the refund of ``invoice.refunded``). ``hold_paid``: the
    paid webhook waits for the payments of record of a scan queued with the move
    (``invoices.payments.release_paid_webhooks``)."""

    invoice: Invoice
    types: Sequence[str]
    notify_paid: bool = False
    extra: dict[str, Any] | None = None
    hold_paid: bool = False


async def record_events(
    session: AsyncSession, settings: Settings, now_ms: int, occurrences: Sequence[Occurrence]
) -> list[Event]:
    """Write the events of ``occurrences``, a delivery to every enabled endpoint of the owner
    that takes the event's type, and the paid webhooks; returns the events."""
    occurrences = [o for o in occurrences if o.types or o.notify_paid]
    if not occurrences:
        return []
    invoices = [o.invoice for o in occurrences]
    x402 = x402_tokens(settings.chain_configs().values())
    views = await owner_views(session, settings.payment_page_url, invoices, x402)
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
    paid_webhooks = [
        paid_webhook_row(o.invoice, now_ms, paid_event_of.get(o.invoice.id), held=o.hold_paid)
        for o in occurrences
        if o.notify_paid and o.invoice.webhook_url
    ]
    await write_events(session, settings, now_ms, events, paid_webhooks)
    return events


def paid_webhook_row(
    invoice: Invoice, now_ms: int, event_id: str | None, *, held: bool = False
) -> dict[str, Any]:
    """The paid webhook to the invoice's webhookUrl, due now; ``event_id`` is its
    ``invoice.paid`` event. A ``held`` one is due only ``PAID_WEBHOOK_HOLD_MS`` later: the
    step that records the invoice's payments releases it sooner, with its ``payments``."""
    assert invoice.webhook_url is not None
    payload = webhook_payload(invoice)
    row = webhook_url_row(
        invoice.owner_key, invoice.id, invoice.webhook_url, payload, now_ms, event_id
    )
    if held:
        row["next_attempt_at"] = now_ms + PAID_WEBHOOK_HOLD_MS
    return row
