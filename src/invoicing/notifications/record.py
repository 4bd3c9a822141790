"""Writing events and their deliveries to the outbox, inside the caller's transaction.

The caller (``invoices.notify`` for an invoice's moves) builds the events; here each one gets
a delivery to every enabled endpoint of its owner that takes its type, the owners' endpoints
read in one query, and events and deliveries go in with one multi-row INSERT each.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.notifications.mail.queue import queue_mail
from invoicing.notifications.outbox import endpoint_delivery_row, ring_after_commit
from invoicing.settings import Settings
from invoicing.tables.notifications import Event, EventEndpoint, WebhookEvent

EVENTS = cast(Table, Event.__table__)
OUTBOX = cast(Table, WebhookEvent.__table__)


async def write_events(
    session: AsyncSession,
    settings: Settings,
    now_ms: int,
    events: Sequence[Event],
    other_deliveries: Sequence[dict[str, Any]] = (),
) -> None:
    """Insert ``events``, a delivery of each to every enabled endpoint of its owner that
    takes its type, then ``other_deliveries`` (outbox rows, e.g. paid webhooks), and a
    message of each event its owner has mailed (``mail.queue``); the process's delivery
    workers are woken when the transaction commits."""
    deliveries = await _endpoint_deliveries(session, settings, events, now_ms)
    deliveries.extend(other_deliveries)
    # Core inserts on the session's connection: a pass that pays a thousand invoices writes
    # a thousand rows of each, and the ORM's bulk insert costs several times the statement.
    connection = await session.connection()
    if events:
        await connection.execute(insert(EVENTS), [_event_row(event) for event in events])
        await queue_mail(session, events, now_ms)
    if deliveries:
        await connection.execute(insert(OUTBOX), deliveries)
        ring_after_commit(session)


def new_event(owner_key: str, event_type: str, now_ms: int, data: dict[str, Any]) -> Event:
    return Event(
        id=str(uuid.uuid4()), owner_key=owner_key, type=event_type, created_at=now_ms, data=data
    )


async def _endpoint_deliveries(
    session: AsyncSession, settings: Settings, events: Sequence[Event], now_ms: int
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


def _event_row(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "owner_key": event.owner_key,
        "type": event.type,
        "invoice_pk": event.invoice_pk,
        "created_at": event.created_at,
        "data": event.data,
    }
