"""Rows of the outbox (``models.WebhookEvent``), due now: one per delivery to make.

Two kinds share it: a webhook to an invoice's ``webhookUrl`` (the paid webhook, built
by ``invoices.notify`` in the paid transition's transaction, or copied by a redelivery) and
an event's envelope to one of the owner's endpoints (``record.write_events``, redeliveries
and pings).

A transaction that writes deliveries rings this process's ``OutboxBell`` when it commits
(``ring_after_commit``): the delivery workers of the process claim them at once instead of
at their next poll (``webhook_poll_interval_s``); workers of other processes find them at
their next poll.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from invoicing.db import Database, ProcessLocal
from invoicing.notifications.endpoints import endpoint_host, endpoint_key
from invoicing.tables.notifications import Event, EventEndpoint, EventStatus


class OutboxBell:
    """Wakes this process's delivery workers: each listens on an event of its own."""

    def __init__(self) -> None:
        self._listeners: set[asyncio.Event] = set()

    def listen(self) -> asyncio.Event:
        listener = asyncio.Event()
        self._listeners.add(listener)
        return listener

    def forget(self, listener: asyncio.Event) -> None:
        self._listeners.discard(listener)

    def ring(self) -> None:
        for listener in self._listeners:
            listener.set()


OUTBOX_BELL: ProcessLocal[OutboxBell] = ProcessLocal(lambda _db: OutboxBell())


def ring_after_commit(session: AsyncSession) -> None:
    """Ring the bell of ``session``'s Database once its transaction commits (never on a
    rollback: the deliveries are not there to claim)."""
    database = Database.of(session)
    if database is None:
        return
    bell = OUTBOX_BELL.of(database)

    def committed(_session: Session) -> None:
        bell.ring()

    event.listen(session.sync_session, "after_commit", committed, once=True)


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
