"""Reading an owner's events and deliveries, redelivering an event, pinging an endpoint.

Events are listed newest first for ``webhook_event_retention_s`` (housekeeping deletes them
after it), by type and by the status of their deliveries (:data:`DELIVERY_STATUSES`); an
event's deliveries are paged the same way, oldest first. Every
lookup is scoped to the owner: another owner's event or endpoint id is 404, exactly like an
id that does not exist. Answers are typed values (:class:`EventRecord`, :class:`Queued`,
:class:`PaidWebhookLog`), one :class:`Attempt` in both logs; the web layer's response models
serialise them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database
from invoicing.errors import InvalidRequest, NotFound
from invoicing.notifications.endpoints import owned_endpoint
from invoicing.notifications.outbox import endpoint_delivery_row, webhook_url_row
from invoicing.notifications.record import new_event
from invoicing.settings import Settings
from invoicing.tables.notifications import PING, Event, EventStatus, WebhookAttempt, WebhookEvent

# Events a page holds at most (a larger limit is capped, as for invoices).
MAX_PAGE = 100
# The events list's ``deliveryStatus`` filter: events with at least one delivery that is
# pending (due or being retried), failing (pending after a failed attempt), delivered, or
# failed (given up).
FAILING = "failing"
DELIVERY_STATUSES = (EventStatus.PENDING, FAILING, EventStatus.DELIVERED, EventStatus.FAILED)


@dataclass(frozen=True)
class EventPage:
    items: list[dict[str, Any]]  # envelopes, as sent
    has_more: bool


@dataclass(frozen=True)
class Attempt:
    """One attempt of a delivery; both logs show it (an event's deliveries, an invoice's
    paid webhooks)."""

    delivery_id: str
    attempt: int
    attempted_at: int
    status_code: int | None
    error: str | None
    duration_ms: int

    @classmethod
    def of(cls, row: WebhookAttempt) -> Attempt:
        return cls(
            row.event_id, row.attempt, row.attempted_at, row.status_code, row.error, row.duration_ms
        )


@dataclass(frozen=True)
class DeliveryRecord:
    """One delivery (an outbox row): to an endpoint, or (``endpoint_id`` None) to the
    invoice's webhookUrl; ``next_attempt_at`` only while it is pending."""

    id: str
    endpoint_id: str | None
    url: str
    status: str
    attempt_count: int
    next_attempt_at: int | None
    created_at: int
    delivered_at: int | None
    attempts: tuple[Attempt, ...] = ()

    @classmethod
    def of(cls, row: WebhookEvent, attempts: Sequence[Attempt] = ()) -> DeliveryRecord:
        pending = row.status == EventStatus.PENDING
        return cls(
            id=row.id,
            endpoint_id=row.endpoint_id,
            url=row.url,
            status=row.status,
            attempt_count=row.attempts,
            next_attempt_at=row.next_attempt_at if pending else None,
            created_at=row.created_at,
            delivered_at=row.delivered_at,
            attempts=tuple(attempts),
        )


@dataclass(frozen=True)
class EventRecord:
    """An event's envelope and a page of its deliveries, oldest first, each with its
    attempts; ``has_more``: later deliveries follow."""

    envelope: dict[str, Any]
    deliveries: list[DeliveryRecord]
    has_more: bool = False


@dataclass(frozen=True)
class PaidWebhookLog:
    """An invoice's paid-webhook deliveries and all their attempts, oldest first."""

    payment_address: str
    deliveries: list[DeliveryRecord]
    attempts: list[Attempt]


@dataclass(frozen=True)
class Queued:
    """A delivery just queued (a redelivery or a ping): pending."""

    event_id: str
    delivery_id: str
    endpoint_id: str | None


def _retained(settings: Settings, now_ms: int) -> int:
    """The oldest event time still listed."""
    return now_ms - int(settings.webhook_event_retention_s * 1000)


async def list_events(
    db: Database,
    settings: Settings,
    owner_key: str,
    now_ms: int,
    *,
    event_type: str | None = None,
    delivery_status: str | None = None,
    after: str | None = None,
    limit: int = 20,
) -> EventPage:
    """The owner's events, newest first; ``after``: only those older than that event (the
    last id of the previous page). An ``after`` that is not the owner's event is 404.
    ``delivery_status``: only events with a delivery in that state (:data:`DELIVERY_STATUSES`)."""
    limit = min(limit, MAX_PAGE)
    conditions: list[Any] = [
        Event.owner_key == owner_key,
        Event.created_at >= _retained(settings, now_ms),
    ]
    if event_type is not None:
        conditions.append(Event.type == event_type)
    if delivery_status is not None:
        conditions.append(_has_delivery(delivery_status))
    async with db.sessions() as session:
        if after is not None:
            cursor = await _owned_event(session, settings, owner_key, after, now_ms)
            conditions.append(Event.seq < cursor.seq)
        rows = list(
            await session.scalars(
                select(Event).where(*conditions).order_by(Event.seq.desc()).limit(limit + 1)
            )
        )
    return EventPage([event.envelope() for event in rows[:limit]], len(rows) > limit)


def _has_delivery(status: str) -> ColumnElement[bool]:
    """SQL condition on ``events``: the event has a delivery in ``status``."""
    if status not in DELIVERY_STATUSES:
        raise ValueError(f"unknown delivery status {status!r}")
    condition: ColumnElement[bool] = WebhookEvent.status == status
    if status == FAILING:
        failed_before = exists().where(WebhookAttempt.event_id == WebhookEvent.id)
        condition = and_(WebhookEvent.status == EventStatus.PENDING, failed_before)
    return exists().where(WebhookEvent.event_id == Event.id, condition)


async def get_event(
    db: Database,
    settings: Settings,
    owner_key: str,
    event_id: str,
    now_ms: int,
    *,
    after: str | None = None,
    limit: int = 20,
) -> EventRecord:
    """The event's envelope and one page of its deliveries (endpoints and the invoice's
    webhookUrl), oldest first, each with its attempts. Redeliveries add deliveries without
    bound over an event's life, so they are paged like the events list: at most ``limit``
    (capped at :data:`MAX_PAGE`), ``after``: the last delivery id of the previous page (one
    that is not this event's is 404). A delivery's attempts are bounded by its own retry
    schedule (``webhook_max_attempts``; the endpoints' backoff window)."""
    limit = min(limit, MAX_PAGE)
    async with db.sessions() as session:
        event = await _owned_event(session, settings, owner_key, event_id, now_ms)
        conditions: list[ColumnElement[bool]] = [WebhookEvent.event_id == event.id]
        if after is not None:
            cursor = await session.scalar(
                select(WebhookEvent).where(
                    WebhookEvent.id == after, WebhookEvent.event_id == event.id
                )
            )
            if cursor is None:
                raise NotFound("no such delivery of this event")
            conditions.append(
                or_(
                    WebhookEvent.created_at > cursor.created_at,
                    and_(
                        WebhookEvent.created_at == cursor.created_at,
                        WebhookEvent.id > cursor.id,
                    ),
                )
            )
        deliveries = list(
            await session.scalars(
                select(WebhookEvent)
                .where(*conditions)
                .order_by(WebhookEvent.created_at, WebhookEvent.id)
                .limit(limit + 1)
            )
        )
        page = deliveries[:limit]
        attempts: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in await session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.event_id.in_([d.id for d in page]))
            .order_by(WebhookAttempt.attempt, WebhookAttempt.id)
        ):
            attempts[attempt.event_id].append(Attempt.of(attempt))
    records = [DeliveryRecord.of(d, attempts.get(d.id, ())) for d in page]
    return EventRecord(event.envelope(), records, len(deliveries) > limit)


async def redeliver(
    db: Database,
    settings: Settings,
    owner_key: str,
    event_id: str,
    now_ms: int,
    *,
    endpoint_id: str | None = None,
) -> Queued:
    """Send the event again, as a new delivery: to one of the owner's endpoints (the
    envelope, retried as usual), or with ``endpoint_id`` None to the invoice's webhookUrl
    (the paid webhook as first sent: ``invoice.paid`` events only)."""
    async with db.transaction() as session:
        event = await _owned_event(session, settings, owner_key, event_id, now_ms)
        if endpoint_id is not None:
            endpoint = await owned_endpoint(session, owner_key, endpoint_id)
            retry_until = now_ms + int(settings.event_retry_window_s * 1000)
            row = endpoint_delivery_row(event, endpoint, now_ms, retry_until)
        else:
            row = await _paid_webhook_again(session, event, now_ms)
        await session.execute(insert(WebhookEvent), [row])
    return _accepted(event.id, row)


async def ping(
    db: Database, settings: Settings, owner_key: str, endpoint_id: str, now_ms: int
) -> Queued:
    """A ``ping`` event sent to one endpoint (enabled or not), once: its outcome shows in
    ``get_event``. It does not go to other endpoints."""
    async with db.transaction() as session:
        endpoint = await owned_endpoint(session, owner_key, endpoint_id)
        event = new_event(owner_key, PING, now_ms, {"endpointId": endpoint.id})
        session.add(event)
        await session.flush()
        row = endpoint_delivery_row(event, endpoint, now_ms, retry_until=now_ms)
        await session.execute(insert(WebhookEvent), [row])
    return _accepted(event.id, row)


async def _owned_event(
    session: AsyncSession, settings: Settings, owner_key: str, event_id: str, now_ms: int
) -> Event:
    event = await session.scalar(
        select(Event).where(
            Event.id == event_id,
            Event.owner_key == owner_key,
            Event.created_at >= _retained(settings, now_ms),
        )
    )
    if event is None:
        raise NotFound("no such event for this owner")
    return event


async def _paid_webhook_again(session: AsyncSession, event: Event, now_ms: int) -> dict[str, Any]:
    """The event's first delivery to the invoice's webhookUrl, sent again: the body first
    sent, not the invoice as it is now. Only an ``invoice.paid`` event of an invoice created
    with a webhookUrl has one (written with the event, and kept while the event is listed)."""
    first = await session.scalar(
        select(WebhookEvent)
        .where(WebhookEvent.event_id == event.id, WebhookEvent.endpoint_id.is_(None))
        .order_by(WebhookEvent.created_at)
        .limit(1)
    )
    if first is None or first.invoice_pk is None:
        raise InvalidRequest(
            "only an invoice.paid event of an invoice created with a webhookUrl goes to it",
            {"field": "webhookUrl"},
        )
    return webhook_url_row(
        first.owner_key, first.invoice_pk, first.url, first.payload, now_ms, event.id
    )


def _accepted(event_id: str, row: dict[str, Any]) -> Queued:
    return Queued(event_id, row["id"], row["endpoint_id"])


async def paid_webhook_log(db: Database, invoice_pk: str, payment_address: str) -> PaidWebhookLog:
    """The invoice's paid-webhook deliveries and every attempt of them, oldest first (the
    deliveries of its events to endpoints are read per event, with :func:`get_event`)."""
    async with db.sessions() as session:
        deliveries = list(
            await session.scalars(
                select(WebhookEvent)
                .where(WebhookEvent.invoice_pk == invoice_pk, WebhookEvent.endpoint_id.is_(None))
                .order_by(WebhookEvent.created_at, WebhookEvent.id)
            )
        )
        attempts = list(
            await session.scalars(
                select(WebhookAttempt)
                .where(WebhookAttempt.event_id.in_([d.id for d in deliveries]))
                .order_by(WebhookAttempt.attempted_at, WebhookAttempt.attempt, WebhookAttempt.id)
            )
        )
    return PaidWebhookLog(
        payment_address,
        [DeliveryRecord.of(delivery) for delivery in deliveries],
        [Attempt.of(attempt) for attempt in attempts],
    )
