"""Recording delivery attempts: store each attempt and move its delivery on.

Deliveries are claimed by ``claims.claim_events`` and sent by the worker. Results are written
only while the claim still holds (same attempt number), so a late writer cannot undo a newer
attempt. The paid webhook (``endpoint_id`` null) has ``webhook_max_attempts`` attempts
``webhook_retry_delay_s`` apart; an event to an owner's endpoint is retried with backoff until
``retry_until`` (``notifications.retries``). Each result also moves the health of its owner's
URL on (``endpoints.record_health``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing import metrics
from invoicing.notifications.claims import ClaimedEvent
from invoicing.notifications.client import Outcome
from invoicing.notifications.endpoints import record_health
from invoicing.notifications.retries import EndpointResult, next_attempt, record_endpoint_results
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.notifications import EventStatus, WebhookAttempt, WebhookEvent


@dataclass(frozen=True)
class AttemptResult:
    """One finished attempt, as the worker records it (``of``: of a claimed event)."""

    event_id: str
    attempt: int
    attempted_at: int
    outcome: Outcome
    url: str
    endpoint_key: str
    endpoint_id: str | None = None
    retry_until: int | None = None

    @classmethod
    def of(cls, event: ClaimedEvent, attempted_at: int, outcome: Outcome) -> AttemptResult:
        return cls(
            event.event_id,
            event.attempt,
            attempted_at,
            outcome,
            event.delivery.url,
            event.endpoint_key,
            event.endpoint_id,
            event.retry_until,
        )


async def record_results(services: Services, results: list[AttemptResult]) -> None:
    """Store attempts and move each event on: delivered, failed, or due again after the delay."""
    if not results:
        return
    async with services.db.transaction() as session:
        await write_results(session, services, results)
    count_results(results)


def count_results(results: list[AttemptResult]) -> None:
    """The attempts' metrics, once their transaction has committed."""
    for result in results:
        metrics.webhook_attempt(result.outcome.kind)


async def write_results(
    session: AsyncSession, services: Services, results: list[AttemptResult]
) -> None:
    """:func:`record_results` inside the caller's transaction (the worker's round also
    claims the next deliveries in it); the caller counts them (``count_results``) after the
    commit."""
    if not results:
        return
    results = [replace(r, outcome=recordable(r.outcome)) for r in results]
    settings = services.settings
    now_ms = services.clock.now_ms()
    changes = []
    endpoint_results = []
    for result in results:
        outcome = result.outcome
        next_at = _next_attempt(settings, result, now_ms)
        give_up = outcome.terminal or next_at is None
        if outcome.delivered:
            status, delivered_at = EventStatus.DELIVERED, now_ms
        else:
            status, delivered_at = (EventStatus.FAILED if give_up else EventStatus.PENDING), None
        changes.append(
            {
                "b_id": result.event_id,
                "b_attempt": result.attempt,
                "b_status": status,
                "b_next": next_at or now_ms,
                "b_delivered_at": delivered_at,
            }
        )
        if result.endpoint_id is not None:
            endpoint_results.append(
                EndpointResult(
                    result.event_id,
                    result.endpoint_id,
                    result.attempted_at,
                    outcome.delivered,
                    window_over=next_at is None,
                )
            )
    connection = await session.connection()
    attempts = cast(Table, WebhookAttempt.__table__)
    await connection.execute(insert(attempts), [_attempt_row(r) for r in results])
    events = cast(Table, WebhookEvent.__table__)
    await connection.execute(
        update(events)
        .where(
            events.c.id == bindparam("b_id"),
            events.c.attempts == bindparam("b_attempt"),
            # Given up meanwhile (its endpoint was disabled or removed): it stays so.
            events.c.status == EventStatus.PENDING,
        )
        .values(
            status=bindparam("b_status"),
            next_attempt_at=bindparam("b_next"),
            delivered_at=bindparam("b_delivered_at"),
            claimed_until=0,
        ),
        changes,
    )
    outcomes = [(r.endpoint_key, r.url, r.outcome.delivered) for r in results]
    await record_health(session, outcomes, now_ms)
    await record_endpoint_results(session, settings, endpoint_results, now_ms)


def _next_attempt(settings: Settings, result: AttemptResult, now_ms: int) -> int | None:
    """When a failed attempt is tried again (None: it was the last one)."""
    if result.endpoint_id is not None and result.retry_until is not None:
        return next_attempt(settings, result.attempt, now_ms, result.retry_until)
    if result.attempt >= settings.webhook_max_attempts:
        return None
    return now_ms + int(settings.webhook_retry_delay_s * 1000)


# Bounds of what an attempt row stores (``recordable``).
MAX_ERROR_CHARS = 500
MAX_DURATION_MS = 10**12


def recordable(outcome: Outcome) -> Outcome:
    """The outcome as the attempt row can hold it on every database: a status code outside
    100..599 becomes a failed attempt with the reason, the error loses control characters
    (PostgreSQL refuses NUL in text) and is cut to ``MAX_ERROR_CHARS``, the duration is
    bounded. A client should never hand over such values; a stranger's answer must not be
    able to stop the write of everyone's results if one does."""
    status, error = outcome.status_code, outcome.error
    if status is not None and not 100 <= status <= 599:
        status, error = None, "ProtocolError: the status code is not three digits"
    if error is not None:
        error = "".join(c if c.isprintable() else "\ufffd" for c in error)[:MAX_ERROR_CHARS]
    duration_ms = min(max(outcome.duration_ms, 0), MAX_DURATION_MS)
    if (status, error, duration_ms) == (outcome.status_code, outcome.error, outcome.duration_ms):
        return outcome
    return replace(outcome, status_code=status, error=error, duration_ms=duration_ms)


def unrecorded(result: AttemptResult, reason: str) -> AttemptResult:
    """A result the database refused, as a failed attempt that says why (retried as any
    failed attempt is)."""
    failed = Outcome(
        error=f"the attempt's result could not be stored: {reason}"[:MAX_ERROR_CHARS],
        duration_ms=recordable(result.outcome).duration_ms,
    )
    return replace(result, outcome=failed)


def _attempt_row(result: AttemptResult) -> dict[str, Any]:
    return {
        "event_id": result.event_id,
        "attempt": result.attempt,
        "attempted_at": result.attempted_at,
        "duration_ms": result.outcome.duration_ms,
        "status_code": result.outcome.status_code,
        "error": result.outcome.error,
    }
