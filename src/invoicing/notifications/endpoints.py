"""Endpoints: the URLs the outbox delivers to. Two tables, one concept, two questions.

*Where do an owner's events go?* ``event_endpoints`` (``models.EventEndpoint``): the URLs an
owner registered: register, list, change, remove. A URL is checked like an invoice's
``webhookUrl`` (``guard.webhook_url_problem``: absolute http(s), https outside development,
no address that can never be delivered), and again at every delivery by the SSRF guard.
``events`` lists event types (the caller's ``rules.event_types``), or is ``["*"]`` for all
of them. An owner holds at most ``max_event_endpoints_per_owner`` endpoints; creates are
counted under the owner's lock, so concurrent ones on several processes cannot pass the cap.

*Is this URL failing for this owner?* ``webhook_endpoints`` (``models.EndpointHealth``): a row
exists only while an owner's URL's latest attempts failed: every failure adds to
``consecutive_failures`` and the first success deletes the row. Due deliveries to failing
URLs are claimed after every other due delivery (``claims.claim_events``), never skipped. That
order matters only while a worker has more due deliveries than free slots, and a failing URL's
delivery waits so for at most one retry delay; so one failure is enough to count: waiting for
three lets a dead URL take several rounds of slots before it is noticed. Health is kept per
owner *and* URL (the key is the SHA-256 of both): an owner who registers another owner's URL,
and whose deliveries to it fail (the receiver refuses what the other owner did not sign),
pushes only their own deliveries back, never the other owner's. Concurrency is capped per
*host* (``host:port`` of the URL), the thing that actually hangs, and per owner
(``claims.Caps``).

Why the two tables stay two: health is keyed by owner and URL, for every URL the outbox sends
to, invoices' ``webhookUrl`` included, which no owner registered; one URL may be registered
several times by one owner. A registration is keyed by its id, holds an owner's subscription
and its own failure window (``retries``), and is disabled, not deleted, when it keeps
failing. One table would need a row per URL that is no registration, and a registration per
URL that shares one streak: merging them changes what is counted.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from sqlalchemy import ColumnElement, Table, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import upsert
from invoicing.errors import InvalidRequest, NotFound, TooManyWebhookEndpoints
from invoicing.notifications.retries import drop_pending
from invoicing.notifications.signing import lock_owner
from invoicing.outbound.guard import webhook_url_problem
from invoicing.tables.notifications import (
    EndpointHealth,
    EventEndpoint,
    EventStatus,
    WebhookEvent,
)

ALL_EVENTS = "*"


@dataclass(frozen=True)
class EndpointRules:
    """The settings' rules on endpoint URLs, the per-owner cap, and the event types an
    endpoint may subscribe to (the invoices' events)."""

    require_https: bool
    allow_private: bool
    max_per_owner: int
    event_types: tuple[str, ...]


@dataclass(frozen=True)
class EndpointChange:
    """A PATCH: the fields given (None: left as it is)."""

    url: str | None = None
    events: list[str] | None = None
    enabled: bool | None = None
    description: str | None = None


def checked_url(url: str, rules: EndpointRules) -> str:
    problem = webhook_url_problem(
        url, require_https=rules.require_https, allow_private=rules.allow_private
    )
    if problem is not None:
        raise InvalidRequest(f"url: {problem}", {"field": "url"})
    return url


def checked_events(events: Sequence[str], known: Sequence[str]) -> list[str]:
    """The subscribed types, each once, in the order given; ``["*"]`` stands alone."""
    if not events:
        raise InvalidRequest('events: list at least one event type, or "*"', {"field": "events"})
    unknown = [event for event in events if event not in known and event != ALL_EVENTS]
    if unknown:
        raise InvalidRequest(
            f"events: unknown event type {unknown[0]!r}",
            {"field": "events", "known": [*known, ALL_EVENTS]},
        )
    if ALL_EVENTS in events and len(set(events)) > 1:
        raise InvalidRequest('events: "*" already takes every type', {"field": "events"})
    return list(dict.fromkeys(events))


async def create_endpoint(
    session: AsyncSession,
    owner_key: str,
    url: str,
    events: Sequence[str],
    description: str | None,
    rules: EndpointRules,
    now_ms: int,
) -> EventEndpoint:
    """Register an endpoint (enabled); 409 ``too_many_webhook_endpoints`` past the cap."""
    endpoint = EventEndpoint(
        id=str(uuid.uuid4()),
        owner_key=owner_key,
        url=checked_url(url, rules),
        events=checked_events(events, rules.event_types),
        description=description,
        enabled=True,
        created_at=now_ms,
        updated_at=now_ms,
    )
    await lock_owner(session, owner_key, now_ms)
    held = await session.scalar(
        select(func.count()).select_from(EventEndpoint).where(EventEndpoint.owner_key == owner_key)
    )
    if (held or 0) >= rules.max_per_owner:
        raise TooManyWebhookEndpoints(
            f"an owner may have at most {rules.max_per_owner} webhook endpoints; remove one first",
            {"max": rules.max_per_owner},
        )
    session.add(endpoint)
    await session.flush()
    return endpoint


async def list_endpoints(session: AsyncSession, owner_key: str) -> list[EventEndpoint]:
    """The owner's endpoints, oldest first."""
    rows = await session.scalars(
        select(EventEndpoint)
        .where(EventEndpoint.owner_key == owner_key)
        .order_by(EventEndpoint.created_at, EventEndpoint.id)
    )
    return list(rows)


async def owned_endpoint(
    session: AsyncSession, owner_key: str, endpoint_id: str, *, lock: bool = False
) -> EventEndpoint:
    """The owner's endpoint; 404 also when it is another owner's."""
    query = select(EventEndpoint).where(
        EventEndpoint.id == endpoint_id, EventEndpoint.owner_key == owner_key
    )
    if lock:
        query = query.with_for_update().execution_options(populate_existing=True)
    endpoint = await session.scalar(query)
    if endpoint is None:
        raise NotFound("no such webhook endpoint for this owner")
    return endpoint


async def update_endpoint(
    session: AsyncSession,
    owner_key: str,
    endpoint_id: str,
    change: EndpointChange,
    rules: EndpointRules,
    now_ms: int,
) -> EventEndpoint:
    """Apply a PATCH. A new URL also takes the endpoint's pending deliveries; disabling drops
    them; enabling clears the disabled reason and the failure streak."""
    url = None if change.url is None else checked_url(change.url, rules)
    events = None if change.events is None else checked_events(change.events, rules.event_types)
    endpoint = await owned_endpoint(session, owner_key, endpoint_id)
    # Deliveries first, then the endpoint: the order the worker locks them in.
    if url is not None and url != endpoint.url:
        await _move_pending(session, endpoint, url)
    if change.enabled is False and endpoint.enabled:
        await drop_pending(session, [endpoint.id], now_ms)
    endpoint = await owned_endpoint(session, owner_key, endpoint_id, lock=True)
    if url is not None:
        endpoint.url = url
    if events is not None:
        endpoint.events = events
    if change.description is not None:
        endpoint.description = change.description
    if change.enabled is True and not endpoint.enabled:
        endpoint.enabled = True
        endpoint.disabled_at = endpoint.disabled_reason = endpoint.failing_since = None
    elif change.enabled is False and endpoint.enabled:
        endpoint.enabled = False
        endpoint.disabled_at = now_ms
        endpoint.disabled_reason = "disabled by the owner"
        endpoint.failing_since = None
    endpoint.updated_at = now_ms
    return endpoint


async def delete_endpoint(
    session: AsyncSession, owner_key: str, endpoint_id: str, now_ms: int
) -> None:
    """Remove the endpoint; its pending deliveries are dropped (their history stays with
    the events)."""
    endpoint = await owned_endpoint(session, owner_key, endpoint_id)
    await drop_pending(session, [endpoint.id], now_ms)  # deliveries first, as the worker
    await session.execute(delete(EventEndpoint).where(EventEndpoint.id == endpoint.id))


async def _move_pending(session: AsyncSession, endpoint: EventEndpoint, url: str) -> None:
    await session.execute(
        update(WebhookEvent)
        .where(
            WebhookEvent.endpoint_id == endpoint.id,
            WebhookEvent.status == EventStatus.PENDING,
        )
        .values(
            url=url,
            endpoint_key=endpoint_key(endpoint.owner_key, url),
            endpoint_host=endpoint_host(url),
        )
        .execution_options(synchronize_session=False)
    )


# ---- health of the URLs delivered to, per owner -------------------------------------

# An endpoint is failing from this many consecutive failed attempts on.
FAILING_AFTER = 1


def endpoint_key(owner_key: str, url: str) -> str:
    """The health key of an owner's URL: the SHA-256 of both (URLs are too long to index)."""
    return hashlib.sha256(f"{owner_key.lower()} {url}".encode()).hexdigest()


def endpoint_host(url: str) -> str:
    """``host:port`` of a webhook URL, the unit of the per-host concurrency cap."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    default_port = 443 if parts.scheme == "https" else 80
    return f"{parts.hostname or ''}:{port or default_port}"[:300]


def endpoint_is_failing() -> ColumnElement[bool]:
    """SQL condition on ``webhook_events``: the event's endpoint is currently failing."""
    return exists(
        select(EndpointHealth.key).where(
            EndpointHealth.key == WebhookEvent.endpoint_key,
            EndpointHealth.consecutive_failures >= FAILING_AFTER,
        )
    )


# (health key, URL, delivered) of one attempt.
HealthOutcome = tuple[str, str, bool]


def tally(outcomes: Iterable[HealthOutcome]) -> tuple[set[str], Counter[str]]:
    """Keys that had a success in the batch, and each one's failures after its last one.

    ``outcomes`` are (key, URL, delivered) in the order the attempts finished.
    """
    succeeded: set[str] = set()
    failures: Counter[str] = Counter()
    for key, _url, delivered in outcomes:
        if delivered:
            succeeded.add(key)
            failures.pop(key, None)
        else:
            failures[key] += 1
    return succeeded, failures


async def record_health(session: AsyncSession, outcomes: list[HealthOutcome], now_ms: int) -> None:
    """Reset the owners' URLs that answered 2xx; add the failures after that to their streaks.

    ``outcomes`` are (key, URL, delivered) in the order the attempts finished. The rows are
    locked first, in key order, so concurrent workers never wait on each other in a circle.
    """
    urls = {key: url for key, url, _ in outcomes}
    succeeded, failures = tally(outcomes)
    known = await session.scalars(
        select(EndpointHealth.key)
        .where(EndpointHealth.key.in_(sorted(urls)))
        .order_by(EndpointHealth.key)
        .with_for_update()
    )
    reset = succeeded.intersection(known)
    if reset:
        await session.execute(delete(EndpointHealth).where(EndpointHealth.key.in_(reset)))
    if failures:
        await _add_failures(session, failures, urls, now_ms)


async def _add_failures(
    session: AsyncSession, failures: Counter[str], urls: dict[str, str], now_ms: int
) -> None:
    rows = [
        {"key": key, "url": urls[key], "consecutive_failures": count, "last_failure_at": now_ms}
        for key, count in sorted(failures.items())
    ]
    connection = await session.connection()
    endpoints = cast(Table, EndpointHealth.__table__)
    statement = upsert(connection.dialect.name, endpoints)
    await connection.execute(
        statement.on_conflict_do_update(
            index_elements=[endpoints.c.key],
            set_={
                "consecutive_failures": endpoints.c.consecutive_failures
                + statement.excluded.consecutive_failures,
                "last_failure_at": statement.excluded.last_failure_at,
            },
        ),
        rows,
    )
