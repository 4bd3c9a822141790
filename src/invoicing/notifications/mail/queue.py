"""The mail outbox rows of a transaction's events: one message per event whose type its
owner has mailed, written with the events (``notifications.record.write_events``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.notifications.mail.choices import mailed_owners
from invoicing.notifications.mail.models import MailMessage, MailStatus
from invoicing.notifications.models import Event

OUTBOX = cast(Table, MailMessage.__table__)


async def queue_mail(session: AsyncSession, events: Sequence[Event], now_ms: int) -> int:
    """Insert a message for each event its owner has mailed; returns how many (one query
    for the owners' settings, one INSERT)."""
    owners = await mailed_owners(session, sorted({event.owner_key for event in events}))
    rows = [
        _row(event, owners[event.owner_key].email, owners[event.owner_key].language, now_ms)
        for event in events
        if event.owner_key in owners and event.type in owners[event.owner_key].events
    ]
    if rows:
        connection = await session.connection()
        await connection.execute(insert(OUTBOX), rows)
    return len(rows)


def _row(event: Event, recipient: str, language: str, now_ms: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "owner_key": event.owner_key,
        "event_id": event.id,
        "event_type": event.type,
        "recipient": recipient,
        "language": language,
        "data": {"invoice": event.data.get("invoice", {})},
        "status": MailStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now_ms,
        "claimed_until": 0,
        "created_at": now_ms,
    }
