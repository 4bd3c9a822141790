"""The mail outbox rows of a transaction's events: one message per event whose type its
owner has mailed (an invoice's or a subscription's), and a payer's receipt with an
``invoice.paid`` event when the payer asked for one and the owner sends receipts; written
with the events (``notifications.record.write_events``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.notifications.mail.choices import mailed_owners
from invoicing.notifications.mail.receipts import RECEIPT_FIELDS, receipt_requests
from invoicing.notifications.mail.texts import RECEIPT
from invoicing.tables.mail import MailMessage, MailStatus, OwnerMail
from invoicing.tables.notifications import Event

OUTBOX = cast(Table, MailMessage.__table__)
PAID = "invoice.paid"


async def queue_mail(session: AsyncSession, events: Sequence[Event], now_ms: int) -> int:
    """Insert the messages of ``events``; returns how many (a query for the owners'
    settings, one for receipt requests when an invoice was paid, one INSERT)."""
    owners = await mailed_owners(session, sorted({event.owner_key for event in events}))
    rows = [
        _row(event, event.type, owner.email, owner.language, _shown(event), now_ms)
        for event in events
        if (owner := owners.get(event.owner_key)) is not None and event.type in owner.events
    ]
    rows += await _receipts(session, events, owners, now_ms)
    if rows:
        connection = await session.connection()
        await connection.execute(insert(OUTBOX), rows)
    return len(rows)


async def _receipts(
    session: AsyncSession, events: Sequence[Event], owners: dict[str, OwnerMail], now_ms: int
) -> list[dict[str, Any]]:
    paid = [
        event
        for event in events
        if event.type == PAID
        and event.invoice_pk is not None
        and event.owner_key in owners
        and owners[event.owner_key].receipts
    ]
    asked = await receipt_requests(session, sorted({e.invoice_pk for e in paid if e.invoice_pk}))
    rows = []
    for event in paid:
        request = asked.get(event.invoice_pk or "")
        if request is not None and request.owner_key == event.owner_key:
            shown = {k: v for k, v in _invoice(event).items() if k in RECEIPT_FIELDS}
            data = {"invoice": shown}
            rows.append(_row(event, RECEIPT, request.email, request.language, data, now_ms))
    return rows


def _invoice(event: Event) -> dict[str, Any]:
    invoice = event.data.get("invoice", {})
    return invoice if isinstance(invoice, dict) else {}


def _shown(event: Event) -> dict[str, Any]:
    """What the message tells: the event's subscription (a subscription event), else its
    invoice."""
    subscription = event.data.get("subscription")
    if event.type.startswith("subscription.") and isinstance(subscription, dict):
        return {"subscription": subscription}
    return {"invoice": _invoice(event)}


def _row(
    event: Event,
    kind: str,
    recipient: str,
    language: str,
    data: dict[str, Any],
    now_ms: int,
) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "owner_key": event.owner_key,
        "event_id": event.id,
        "event_type": kind,
        "recipient": recipient,
        "language": language,
        "data": data,
        "status": MailStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now_ms,
        "claimed_until": 0,
        "created_at": now_ms,
    }
