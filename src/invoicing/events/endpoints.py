"""An owner's event endpoints: register, list, change, remove.

A URL is checked like an invoice's ``webhookUrl`` (``webhooks.guard.webhook_url_problem``:
absolute http(s), https outside development, no address that can never be delivered), and
again at every delivery by the SSRF guard. ``events`` lists event types from
``invoices.lifecycle.InvoiceEvent``, or is ``["*"]`` for all of them. An owner holds at most
``max_event_endpoints_per_owner`` endpoints; creates are counted under the owner's lock, so
concurrent ones on several processes cannot pass the cap.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.errors import InvalidRequest, NotFound, TooManyWebhookEndpoints
from invoicing.events.models import EventEndpoint
from invoicing.events.retries import drop_pending
from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.webhooks.endpoints import endpoint_host, endpoint_key
from invoicing.webhooks.guard import webhook_url_problem
from invoicing.webhooks.models import EventStatus, WebhookEvent
from invoicing.webhooks.signing import lock_owner

ALL_EVENTS = "*"
EVENT_TYPES = tuple(str(event) for event in InvoiceEvent)


@dataclass(frozen=True)
class EndpointRules:
    """The settings' rules on endpoint URLs, and the per-owner cap."""

    require_https: bool
    allow_private: bool
    max_per_owner: int


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


def checked_events(events: Sequence[str]) -> list[str]:
    """The subscribed types, each once, in the order given; ``["*"]`` stands alone."""
    if not events:
        raise InvalidRequest('events: list at least one event type, or "*"', {"field": "events"})
    unknown = [event for event in events if event not in EVENT_TYPES and event != ALL_EVENTS]
    if unknown:
        raise InvalidRequest(
            f"events: unknown event type {unknown[0]!r}",
            {"field": "events", "known": [*EVENT_TYPES, ALL_EVENTS]},
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
        events=checked_events(events),
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
    events = None if change.events is None else checked_events(change.events)
    endpoint = await owned_endpoint(session, owner_key, endpoint_id)
    # Deliveries first, then the endpoint: the order the worker locks them in.
    if url is not None and url != endpoint.url:
        await _move_pending(session, endpoint.id, url)
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


async def _move_pending(session: AsyncSession, endpoint_id: str, url: str) -> None:
    await session.execute(
        update(WebhookEvent)
        .where(
            WebhookEvent.endpoint_id == endpoint_id,
            WebhookEvent.status == EventStatus.PENDING,
        )
        .values(url=url, endpoint_key=endpoint_key(url), endpoint_host=endpoint_host(url))
        .execution_options(synchronize_session=False)
    )


def endpoint_to_dict(endpoint: EventEndpoint) -> dict[str, Any]:
    """An endpoint as the API shows it."""
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "events": endpoint.events,
        "description": endpoint.description,
        "enabled": endpoint.enabled,
        "disabledReason": endpoint.disabled_reason,
        "disabledAt": endpoint.disabled_at,
        "failingSince": endpoint.failing_since,
        "createdAt": endpoint.created_at,
        "updatedAt": endpoint.updated_at,
    }
