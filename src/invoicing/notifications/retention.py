"""Pruning events, and finished deliveries with their attempts, past the retention.

Events older than ``webhook_event_retention_s`` (default 30 days) go whatever their
deliveries' state: the events list stops showing them at that age. Deliveries go, with their
attempts, only once they are over (delivered, or failed for good) and that old; pending ones
stay whatever their age; sent and failed mail likewise (``prune_finished_mail``). Deleted
in chunks, each its own short transaction, so a large backlog never holds the outbox's
locks for long (housekeeping runs this every minute).
"""

from __future__ import annotations

from sqlalchemy import delete, select

from invoicing.db import Database
from invoicing.tables.mail import MailMessage, MailStatus
from invoicing.tables.notifications import Event, EventStatus, WebhookAttempt, WebhookEvent

FINISHED = (EventStatus.DELIVERED, EventStatus.FAILED)
MAIL_FINISHED = (MailStatus.SENT, MailStatus.FAILED)
# Events per transaction (their ids are bound as parameters: well under every driver's cap).
PRUNE_CHUNK = 1000


async def prune_finished_events(
    db: Database, now_ms: int, retention_ms: int, chunk: int = PRUNE_CHUNK
) -> int:
    """Delete finished events created before ``now_ms - retention_ms`` and their attempts;
    returns how many events went."""
    cutoff = now_ms - retention_ms
    pruned = 0
    while True:
        async with db.transaction() as session:
            ids = list(
                await session.scalars(
                    select(WebhookEvent.id)
                    .where(WebhookEvent.status.in_(FINISHED), WebhookEvent.created_at < cutoff)
                    .limit(chunk)
                )
            )
            if ids:
                await session.execute(
                    delete(WebhookAttempt).where(WebhookAttempt.event_id.in_(ids))
                )
                await session.execute(delete(WebhookEvent).where(WebhookEvent.id.in_(ids)))
        pruned += len(ids)
        if len(ids) < chunk:
            return pruned


async def prune_events(
    db: Database, now_ms: int, retention_ms: int, chunk: int = PRUNE_CHUNK
) -> int:
    """Delete events created before ``now_ms - retention_ms``, a chunk per transaction;
    returns how many went (their deliveries go with :func:`prune_finished_events`)."""
    pruned = 0
    while True:
        async with db.transaction() as session:
            seqs = list(
                await session.scalars(
                    select(Event.seq).where(Event.created_at < now_ms - retention_ms).limit(chunk)
                )
            )
            if seqs:
                await session.execute(delete(Event).where(Event.seq.in_(seqs)))
        pruned += len(seqs)
        if len(seqs) < chunk:
            return pruned


async def prune_finished_mail(
    db: Database, now_ms: int, retention_ms: int, chunk: int = PRUNE_CHUNK
) -> int:
    """Delete sent and failed mail created before ``now_ms - retention_ms`` (pending mail
    stays whatever its age), a chunk per transaction; returns how many went."""
    pruned = 0
    while True:
        async with db.transaction() as session:
            ids = list(
                await session.scalars(
                    select(MailMessage.id)
                    .where(
                        MailMessage.status.in_(MAIL_FINISHED),
                        MailMessage.created_at < now_ms - retention_ms,
                    )
                    .limit(chunk)
                )
            )
            if ids:
                await session.execute(delete(MailMessage).where(MailMessage.id.in_(ids)))
        pruned += len(ids)
        if len(ids) < chunk:
            return pruned
