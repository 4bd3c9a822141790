"""Delivering outbox events: claim due events, send them, record every attempt.

A claim bumps the event's attempt number and leases it (``claimed_until``) in one
transaction under ``FOR UPDATE SKIP LOCKED``, so two worker processes never send the same
attempt at once; a worker that dies mid-attempt loses its lease and another one takes the
event over with the next attempt number. Results are written only while the claim still
holds (same attempt number), so a late writer cannot undo a newer attempt.

Each claimed batch also reads its owners' webhook options (signing secrets and whether to
send the API key, ``signing.webhook_options_by_owner``) in one query; the signature itself
is computed when the attempt is sent (``signed_delivery``), over the exact body bytes.

Two kinds of row share the outbox: the paid webhook (``endpoint_id`` null: the
creation credential's headers, ``webhook_max_attempts`` attempts ``webhook_retry_delay_s``
apart) and an event to an owner's endpoint (the event's envelope, ``x-service-event-id`` =
the event's id, signed, retried with backoff until ``retry_until``: ``notifications.retries``).

The import that runs up: ``invoices.models``. The paid webhook carries the credential that
created its invoice (the API key while it is not revoked, or the creation request's signature
and timestamp), read at claim time from the invoice's row and its API key's, in the claim's
one query.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic import SecretStr
from sqlalchemy import Select, Table, and_, bindparam, insert, not_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing import metrics
from invoicing.auth.api_keys import API_KEY
from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.auth.models import ApiKey
from invoicing.auth.secrets import ServerSecrets
from invoicing.invoices.models import Invoice
from invoicing.notifications.client import Delivery, Outcome
from invoicing.notifications.endpoints import endpoint_is_failing, record_health
from invoicing.notifications.models import EventStatus, WebhookAttempt, WebhookEvent
from invoicing.notifications.retries import EndpointResult, next_attempt, record_endpoint_results
from invoicing.notifications.signing import (
    WEBHOOK_SIGNATURE_HEADER,
    WebhookOptions,
    signature_header,
    webhook_options_by_owner,
)
from invoicing.services import Services
from invoicing.settings import Settings

EVENT_ID_HEADER = "x-service-event-id"
ATTEMPT_HEADER = "x-service-delivery-attempt"
DEFAULT_OPTIONS = WebhookOptions()
# A claim outlives the attempt's timeout by this much before another worker may take over.
LEASE_MARGIN_MS = 30_000


@dataclass(frozen=True)
class ClaimedEvent:
    """One attempt to make, owned by this worker until its lease ends."""

    event_id: str
    attempt: int
    endpoint_host: str
    delivery: Delivery
    # The owner's active signing secrets, oldest first (empty: sent unsigned).
    signing_secrets: tuple[SecretStr, ...] = ()
    # An event to an owner's endpoint (None: the paid webhook), and its last try.
    endpoint_id: str | None = None
    retry_until: int | None = None


def signed_delivery(event: ClaimedEvent, now_ms: int) -> Delivery:
    """The delivery as it goes out at ``now_ms``: with ``x-service-webhook-signature`` over
    its body bytes when the owner has active secrets (``t`` = this send time, in seconds)."""
    header = signature_header(event.signing_secrets, now_ms // 1000, event.delivery.body)
    if header is None:
        return event.delivery
    return replace(
        event.delivery, headers={**event.delivery.headers, WEBHOOK_SIGNATURE_HEADER: header}
    )


@dataclass(frozen=True)
class AttemptResult:
    event_id: str
    attempt: int
    attempted_at: int
    outcome: Outcome
    url: str
    endpoint_id: str | None = None
    retry_until: int | None = None


def event_headers(
    event_id: str, attempt: int, invoice: Invoice | None, api_key: SecretStr | None
) -> dict[str, str]:
    """Headers of the paid webhook (docs/integration/webhooks.md): the creation credential,
    the event id and attempt number."""
    headers = {"content-type": "application/json"}
    if invoice is not None and invoice.auth_mode == "api_key" and api_key:
        headers[API_KEY_HEADER] = api_key.get_secret_value()
    elif invoice is not None and invoice.auth_signature and invoice.auth_timestamp:
        headers[SIGNATURE_HEADER] = invoice.auth_signature
        headers[TIMESTAMP_HEADER] = invoice.auth_timestamp
    headers[EVENT_ID_HEADER] = event_id
    headers[ATTEMPT_HEADER] = str(attempt)
    return headers


def endpoint_headers(event_id: str, attempt: int) -> dict[str, str]:
    """Headers of an event to an owner's endpoint: the event's id (stable across attempts
    and redeliveries, for deduplication) and the attempt number; never a credential."""
    return {
        "content-type": "application/json",
        EVENT_ID_HEADER: event_id,
        ATTEMPT_HEADER: str(attempt),
    }


def encode_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


async def claim_events(
    services: Services, now_ms: int, limit: int, in_flight: Mapping[str, int] | None = None
) -> list[ClaimedEvent]:
    """Lease up to ``limit`` due events and take their next attempt number.

    Due events of failing endpoints come after everyone else's, each group oldest first (a
    failing endpoint's event waits so for at most one retry delay). No host gets more than
    ``webhook_per_host_concurrency`` attempts in flight, counting ``in_flight`` (this
    worker's attempts per host); events over that stay unclaimed.
    """
    settings = services.settings
    cap = settings.webhook_per_host_concurrency
    in_flight = in_flight or {}
    full_hosts = sorted(host for host, count in in_flight.items() if count >= cap)
    patience_ms = int(settings.webhook_retry_delay_s * 1000)
    lease_until = now_ms + int(settings.webhook_timeout_s * 1000) + LEASE_MARGIN_MS
    async with services.db.transaction() as session:
        rows = list(
            await session.execute(_due_events(now_ms, patience_ms, full_hosts, False).limit(limit))
        )
        if len(rows) < limit:
            deferred = _due_events(now_ms, patience_ms, full_hosts, True)
            rows += await session.execute(deferred.limit(limit - len(rows)))
        ids = within_host_cap([(row[0], row[1]) for row in rows], in_flight, cap)
        if not ids:
            return []
        await session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.id.in_(ids))
            .values(claimed_until=lease_until, attempts=WebhookEvent.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        return await _load_claimed(session, services, ids)


def _due_events(
    now_ms: int, patience_ms: int, full_hosts: list[str], deferred: bool
) -> Select[str, str]:
    """Due, unclaimed events (oldest first, rows locked); ``deferred``: of failing endpoints."""
    waiting = and_(endpoint_is_failing(), WebhookEvent.next_attempt_at > now_ms - patience_ms)
    conditions = [
        WebhookEvent.status == EventStatus.PENDING,
        WebhookEvent.next_attempt_at <= now_ms,
        WebhookEvent.claimed_until <= now_ms,
        waiting if deferred else not_(waiting),
    ]
    if full_hosts:
        conditions.append(WebhookEvent.endpoint_host.not_in(full_hosts))
    return (
        select(WebhookEvent.id, WebhookEvent.endpoint_host)
        .where(*conditions)
        .order_by(WebhookEvent.next_attempt_at, WebhookEvent.id)
        .with_for_update(skip_locked=True)
    )


def within_host_cap(
    rows: list[tuple[str, str]], in_flight: Mapping[str, int], cap: int
) -> list[str]:
    """Ids of the candidates, in order, leaving out any that would put a host over the cap."""
    taken = Counter(in_flight)
    ids: dict[str, None] = {}
    for event_id, host in rows:
        if event_id not in ids and taken[host] < cap:
            taken[host] += 1
            ids[event_id] = None
    return list(ids)


async def _load_claimed(
    session: AsyncSession, services: Services, ids: list[str]
) -> list[ClaimedEvent]:
    rows = await session.execute(
        select(WebhookEvent, Invoice, ApiKey.key_encrypted)
        .outerjoin(Invoice, Invoice.id == WebhookEvent.invoice_pk)
        # A revoked key is never sent again (the header is left out).
        .outerjoin(ApiKey, and_(ApiKey.id == Invoice.api_key_id, ApiKey.revoked_at.is_(None)))
        .where(WebhookEvent.id.in_(ids))
        .order_by(WebhookEvent.next_attempt_at, WebhookEvent.id)
    )
    loaded = list(rows)
    secret = ServerSecrets.of(services.settings)
    owners = {event.owner_key for event, _invoice, _key in loaded}
    options = await webhook_options_by_owner(session, owners, secret)
    claimed = []
    for event, invoice, key_encrypted in loaded:
        owner = options.get(event.owner_key, DEFAULT_OPTIONS)
        send_key = key_encrypted and owner.api_key_header
        api_key = API_KEY.unseal(key_encrypted, secret) if send_key else None
        if event.endpoint_id is None:
            headers = event_headers(event.id, event.attempts, invoice, api_key)
        else:
            headers = endpoint_headers(event.payload["id"], event.attempts)
        claimed.append(
            ClaimedEvent(
                event_id=event.id,
                attempt=event.attempts,
                endpoint_host=event.endpoint_host,
                delivery=Delivery(url=event.url, body=encode_body(event.payload), headers=headers),
                signing_secrets=owner.secrets,
                endpoint_id=event.endpoint_id,
                retry_until=event.retry_until,
            )
        )
    return claimed


async def record_results(services: Services, results: list[AttemptResult]) -> None:
    """Store attempts and move each event on: delivered, failed, or due again after the delay."""
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
    async with services.db.transaction() as session:
        await session.execute(insert(WebhookAttempt), [_attempt_row(r) for r in results])
        events = cast(Table, WebhookEvent.__table__)
        connection = await session.connection()
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
        await record_health(session, [(r.url, r.outcome.delivered) for r in results], now_ms)
        await record_endpoint_results(session, settings, endpoint_results, now_ms)
    for result in results:
        metrics.webhook_attempt(result.outcome.kind)


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
