"""Retrying event deliveries to owners' endpoints, and disabling endpoints that keep failing.

A delivery to an endpoint is tried at once, then again after ``event_retry_base_s`` (60 s),
the wait doubling after each failure up to ``event_retry_max_delay_s`` (12 h), until its
``retry_until`` (the event's time + ``event_retry_window_s``, 3 days; a test ping has no
retries): the last attempt is made at that time. With the defaults that is 16 attempts, at
0, 1, 3, 7, 15, 31, 63 min, 2 h 07, 4 h 15, 8 h 31, 17 h 03, 29 h 03, 41 h 03, 53 h 03,
65 h 03 and 72 h after the event.

An enabled endpoint remembers its first failed attempt since its last 2xx
(``failing_since``). It is disabled, with the reason and time, and its pending deliveries are
dropped, when it has failed every attempt for ``event_retry_window_s``: at a failed attempt
that many seconds after ``failing_since``, or when a delivery fails its last attempt without
a 2xx from the endpoint since that delivery's first attempt. The owner enables it again with
``PATCH /integration/webhook-endpoints``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.settings import Settings
from invoicing.tables.notifications import EventEndpoint, EventStatus, WebhookAttempt, WebhookEvent


@dataclass(frozen=True)
class EndpointResult:
    """One finished attempt of a delivery to an endpoint."""

    delivery_id: str
    endpoint_id: str
    attempted_at: int
    delivered: bool
    window_over: bool  # it was the delivery's last attempt: its retry_until has come


def retry_delay_ms(settings: Settings, attempt: int) -> int:
    """The wait after failed attempt number ``attempt`` (1-based) of an endpoint delivery."""
    base_ms = int(settings.event_retry_base_s * 1000)
    cap_ms = int(settings.event_retry_max_delay_s * 1000)
    return min(cap_ms, base_ms << min(attempt - 1, 40))


def next_attempt(settings: Settings, attempt: int, now_ms: int, retry_until: int) -> int | None:
    """When a delivery whose attempt ``attempt`` failed at ``now_ms`` is tried again; None
    when that was its last attempt."""
    if now_ms >= retry_until:
        return None
    return min(now_ms + retry_delay_ms(settings, attempt), retry_until)


async def record_endpoint_results(
    session: AsyncSession, settings: Settings, results: Sequence[EndpointResult], now_ms: int
) -> list[str]:
    """Move each enabled endpoint's failure streak on and disable the ones failing for the
    whole window; returns the ids disabled. Runs in the transaction that stored the attempts
    (``notifications.delivery.record_results``)."""
    if not results:
        return []
    succeeded, first_failure = _tally(results)
    endpoints = list(
        await session.scalars(
            select(EventEndpoint)
            .where(EventEndpoint.id.in_(sorted({r.endpoint_id for r in results})))
            .where(EventEndpoint.enabled.is_(True))
            .order_by(EventEndpoint.id)
            .with_for_update()
        )
    )
    window_ms = int(settings.event_retry_window_s * 1000)
    gave_up = [r for r in results if r.window_over and not r.delivered]
    exhausted = await _exhausted_since(session, gave_up, window_ms)
    disabled = []
    for endpoint in endpoints:
        if endpoint.id in succeeded:
            endpoint.failing_since = None
            continue
        if endpoint.id not in first_failure:
            continue
        if endpoint.failing_since is None:
            endpoint.failing_since = first_failure[endpoint.id]
        since = endpoint.failing_since
        gave_up_whole_window = any(since <= first for first in exhausted.get(endpoint.id, ()))
        if now_ms - since >= window_ms or gave_up_whole_window:
            _disable(endpoint, settings, now_ms)
            disabled.append(endpoint.id)
    if disabled:
        await drop_pending(session, disabled, now_ms)
    return disabled


def _tally(results: Sequence[EndpointResult]) -> tuple[set[str], dict[str, int]]:
    """Endpoints whose latest attempt in the batch succeeded, and for the others the time of
    their first failure after their last success in the batch."""
    succeeded: set[str] = set()
    first_failure: dict[str, int] = {}
    for result in sorted(results, key=lambda r: r.attempted_at):
        if result.delivered:
            succeeded.add(result.endpoint_id)
            first_failure.pop(result.endpoint_id, None)
        else:
            succeeded.discard(result.endpoint_id)
            first_failure.setdefault(result.endpoint_id, result.attempted_at)
    return succeeded, first_failure


async def _exhausted_since(
    session: AsyncSession, gave_up: Sequence[EndpointResult], window_ms: int
) -> dict[str, list[int]]:
    """For deliveries that just failed the last attempt of a whole window's schedule (not a
    ping's single one): their first attempt's time, by endpoint."""
    if not gave_up:
        return {}
    endpoint_of = {r.delivery_id: r.endpoint_id for r in gave_up}
    rows = await session.execute(
        select(WebhookAttempt.event_id, func.min(WebhookAttempt.attempted_at))
        .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
        .where(
            WebhookAttempt.event_id.in_(sorted(endpoint_of)),
            WebhookEvent.retry_until - WebhookEvent.created_at >= window_ms,
        )
        .group_by(WebhookAttempt.event_id)
    )
    found: dict[str, list[int]] = {}
    for delivery_id, first in rows:
        found.setdefault(endpoint_of[delivery_id], []).append(int(first))
    return found


def _disable(endpoint: EventEndpoint, settings: Settings, now_ms: int) -> None:
    hours = settings.event_retry_window_s / 3600
    endpoint.enabled = False
    endpoint.disabled_at = now_ms
    endpoint.disabled_reason = f"every delivery attempt failed for {hours:g} hours"
    endpoint.updated_at = now_ms


async def drop_pending(session: AsyncSession, endpoint_ids: list[str], now_ms: int) -> None:
    """Deliveries still waiting for these endpoints are given up (failed, not sent)."""
    await session.execute(
        update(WebhookEvent)
        .where(
            WebhookEvent.endpoint_id.in_(endpoint_ids),
            WebhookEvent.status == EventStatus.PENDING,
        )
        .values(status=EventStatus.FAILED, next_attempt_at=now_ms)
        .execution_options(synchronize_session=False)
    )
