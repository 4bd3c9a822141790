"""Endpoint health: which webhook URLs are failing, so a busy worker tries them last.

An endpoint is one webhook URL (owners use one URL for many invoices). A row in
``webhook_endpoints`` exists only while the endpoint's latest attempts failed: every failure
adds to ``consecutive_failures`` and the first success deletes the row. Endpoints with
``FAILING_AFTER`` or more consecutive failures are *failing*; their due events are claimed
after the due events of every other endpoint (see ``delivery.claim_events``), never skipped.
That order matters only while a worker has more due events than free slots, and a failing
endpoint's event waits so for at most one retry delay; so one failure is enough to count:
waiting for three lets a dead endpoint take several rounds of slots before it is noticed.

Concurrency is capped per *host* (``host:port`` of the URL), the thing that actually hangs.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from typing import cast
from urllib.parse import urlsplit

from sqlalchemy import ColumnElement, Table, delete, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import upsert
from invoicing.webhooks.models import WebhookEndpoint, WebhookEvent

# An endpoint is failing from this many consecutive failed attempts on.
FAILING_AFTER = 1


def endpoint_key(url: str) -> str:
    """The endpoint's key: the SHA-256 of its URL (URLs are too long to index)."""
    return hashlib.sha256(url.encode()).hexdigest()


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
        select(WebhookEndpoint.key).where(
            WebhookEndpoint.key == WebhookEvent.endpoint_key,
            WebhookEndpoint.consecutive_failures >= FAILING_AFTER,
        )
    )


def tally(outcomes: Iterable[tuple[str, bool]]) -> tuple[set[str], Counter[str]]:
    """Endpoints that had a success in the batch, and each one's failures after its last one.

    ``outcomes`` are (URL, delivered) in the order the attempts finished.
    """
    succeeded: set[str] = set()
    failures: Counter[str] = Counter()
    for url, delivered in outcomes:
        key = endpoint_key(url)
        if delivered:
            succeeded.add(key)
            failures.pop(key, None)
        else:
            failures[key] += 1
    return succeeded, failures


async def record_health(
    session: AsyncSession, outcomes: list[tuple[str, bool]], now_ms: int
) -> None:
    """Reset the endpoints that answered 2xx; add the failures after that to their streaks.

    ``outcomes`` are (URL, delivered) in the order the attempts finished. The endpoints' rows
    are locked first, in key order, so concurrent workers never wait on each other in a circle.
    """
    urls = {endpoint_key(url): url for url, _ in outcomes}
    succeeded, failures = tally(outcomes)
    known = await session.scalars(
        select(WebhookEndpoint.key)
        .where(WebhookEndpoint.key.in_(sorted(urls)))
        .order_by(WebhookEndpoint.key)
        .with_for_update()
    )
    reset = succeeded.intersection(known)
    if reset:
        await session.execute(delete(WebhookEndpoint).where(WebhookEndpoint.key.in_(reset)))
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
    endpoints = cast(Table, WebhookEndpoint.__table__)
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
