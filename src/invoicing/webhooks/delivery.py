"""Delivering outbox events: claim due events, send them, record every attempt.

A claim bumps the event's attempt number and leases it (``claimed_until``) in one
transaction under ``FOR UPDATE SKIP LOCKED``, so two worker processes never send the same
attempt at once; a worker that dies mid-attempt loses its lease and another one takes the
event over with the next attempt number. Results are written only while the claim still
holds (same attempt number), so a late writer cannot undo a newer attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.api_keys import decrypt_key
from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.auth.models import ApiKey
from invoicing.invoices.models import Invoice
from invoicing.services import Services
from invoicing.webhooks.client import Delivery, Outcome
from invoicing.webhooks.models import EventStatus, WebhookAttempt, WebhookEvent

EVENT_ID_HEADER = "x-service-event-id"
ATTEMPT_HEADER = "x-service-delivery-attempt"
# A claim outlives the attempt's timeout by this much before another worker may take over.
LEASE_MARGIN_MS = 30_000


@dataclass(frozen=True)
class ClaimedEvent:
    """One attempt to make, owned by this worker until its lease ends."""

    event_id: str
    attempt: int
    delivery: Delivery


@dataclass(frozen=True)
class AttemptResult:
    event_id: str
    attempt: int
    attempted_at: int
    outcome: Outcome


def event_headers(
    event_id: str, attempt: int, invoice: Invoice | None, api_key: str | None
) -> dict[str, str]:
    """Headers of DESIGN section 6: the creation credential, the event id and attempt number."""
    headers = {"content-type": "application/json"}
    if invoice is not None and invoice.auth_mode == "api_key" and api_key:
        headers[API_KEY_HEADER] = api_key
    elif invoice is not None and invoice.auth_signature and invoice.auth_timestamp:
        headers[SIGNATURE_HEADER] = invoice.auth_signature
        headers[TIMESTAMP_HEADER] = invoice.auth_timestamp
    headers[EVENT_ID_HEADER] = event_id
    headers[ATTEMPT_HEADER] = str(attempt)
    return headers


def encode_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


async def claim_events(services: Services, now_ms: int, limit: int) -> list[ClaimedEvent]:
    """Lease up to ``limit`` due events (oldest first) and take their next attempt number."""
    lease_until = now_ms + int(services.settings.webhook_timeout_s * 1000) + LEASE_MARGIN_MS
    async with services.db.transaction() as session:
        due = (
            select(WebhookEvent.id)
            .where(
                WebhookEvent.status == EventStatus.PENDING,
                WebhookEvent.next_attempt_at <= now_ms,
                WebhookEvent.claimed_until <= now_ms,
            )
            .order_by(WebhookEvent.next_attempt_at, WebhookEvent.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        ids = list(await session.scalars(due))
        if not ids:
            return []
        await session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.id.in_(ids))
            .values(claimed_until=lease_until, attempts=WebhookEvent.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        return await _load_claimed(session, services, ids)


async def _load_claimed(
    session: AsyncSession, services: Services, ids: list[str]
) -> list[ClaimedEvent]:
    rows = await session.execute(
        select(WebhookEvent, Invoice, ApiKey.key_encrypted)
        .join(Invoice, Invoice.id == WebhookEvent.invoice_pk)
        .outerjoin(ApiKey, ApiKey.id == Invoice.api_key_id)
        .where(WebhookEvent.id.in_(ids))
        .order_by(WebhookEvent.next_attempt_at, WebhookEvent.id)
    )
    claimed = []
    for event, invoice, key_encrypted in rows:
        api_key = decrypt_key(key_encrypted, services.settings.secret) if key_encrypted else None
        claimed.append(
            ClaimedEvent(
                event_id=event.id,
                attempt=event.attempts,
                delivery=Delivery(
                    url=event.url,
                    body=encode_body(event.payload),
                    headers=event_headers(event.id, event.attempts, invoice, api_key),
                ),
            )
        )
    return claimed


async def record_results(services: Services, results: list[AttemptResult]) -> None:
    """Store attempts and move each event on: delivered, failed, or due again after the delay."""
    if not results:
        return
    settings = services.settings
    now_ms = services.clock.now_ms()
    retry_ms = int(settings.webhook_retry_delay_s * 1000)
    changes = []
    for result in results:
        outcome = result.outcome
        give_up = outcome.terminal or result.attempt >= settings.webhook_max_attempts
        if outcome.delivered:
            status, delivered_at = EventStatus.DELIVERED, now_ms
        else:
            status, delivered_at = (EventStatus.FAILED if give_up else EventStatus.PENDING), None
        changes.append(
            {
                "b_id": result.event_id,
                "b_attempt": result.attempt,
                "b_status": status,
                "b_next": now_ms + retry_ms,
                "b_delivered_at": delivered_at,
            }
        )
    async with services.db.transaction() as session:
        await session.execute(insert(WebhookAttempt), [_attempt_row(r) for r in results])
        events = cast(Table, WebhookEvent.__table__)
        connection = await session.connection()
        await connection.execute(
            update(events)
            .where(
                events.c.id == bindparam("b_id"),
                events.c.attempts == bindparam("b_attempt"),
            )
            .values(
                status=bindparam("b_status"),
                next_attempt_at=bindparam("b_next"),
                delivered_at=bindparam("b_delivered_at"),
                claimed_until=0,
            ),
            changes,
        )


def _attempt_row(result: AttemptResult) -> dict[str, Any]:
    return {
        "event_id": result.event_id,
        "attempt": result.attempt,
        "attempted_at": result.attempted_at,
        "duration_ms": result.outcome.duration_ms,
        "status_code": result.outcome.status_code,
        "error": result.outcome.error,
    }
