"""Claiming due deliveries: which ones a worker takes, and what each carries.

A claim bumps the delivery's attempt number and leases it (``claimed_until``) in one
transaction under ``FOR UPDATE SKIP LOCKED``, so two worker processes never send the same
attempt at once; a worker that dies mid-attempt loses its lease and another one takes the
delivery over with the next attempt number.

Which ones: due deliveries oldest first, those of failing endpoints (``endpoints``: health
per owner and URL) after everyone else's; and no more in flight than the caps allow
(:class:`Caps`): ``webhook_per_host_concurrency`` per owner to one ``host:port`` (the thing
that hangs), and for one owner its share, ``webhook_per_owner_concurrency``, beyond which it
only takes spare slots, never the quarter of the worker's slots kept for owners within their
share (so one owner's endpoints that hang until the timeout, or fail, hold at most three
quarters of the slots, and every other owner's deliveries still find free ones).

Each claimed batch also reads its owners' webhook options (signing secrets and whether to
send the API key, ``signing.webhook_options_by_owner``) in one query; the signature itself
is computed when the attempt is sent (``signed_delivery``), over the exact body bytes.

Two kinds of row share the outbox: the paid webhook (``endpoint_id`` null: the creation
credential's headers) and an event to an owner's endpoint (the event's envelope,
``x-service-event-id`` = the event's id, signed).

The paid webhook carries the credential that created its invoice (the API key while it is
not revoked, or the creation request's signature and timestamp), read at claim time from the
invoice's row (``tables.invoices``) and its API key's, in the claim's one query.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import SecretStr
from sqlalchemy import Select, Table, and_, not_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.api_keys import API_KEY
from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.auth.secrets import ServerSecrets
from invoicing.notifications.client import Delivery
from invoicing.notifications.endpoints import endpoint_is_failing
from invoicing.notifications.signing import (
    WEBHOOK_SIGNATURE_HEADER,
    WebhookOptions,
    signature_header,
    webhook_options_by_owner,
)
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.auth import ApiKey
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventStatus, WebhookEvent

EVENT_ID_HEADER = "x-service-event-id"
ATTEMPT_HEADER = "x-service-delivery-attempt"
DEFAULT_OPTIONS = WebhookOptions()
# A claim outlives the attempt's timeout by this much before another worker may take over.
LEASE_MARGIN_MS = 30_000
# A host that answers fast may have this many times its cap claimed and queued beyond the
# attempts in flight (``Caps.held``). A queued attempt waits at most for one attempt of its
# host (the timeout) before it starts, so its lease covers it only while the timeout is
# under the margin; with a longer timeout there is no queue (``Caps.of``).
HOST_QUEUE = 1
# The most hosts a worker remembers as answering fast (the oldest news is forgotten first).
FAST_HOSTS = 10_000
OwnerHost = tuple[str, str]  # (owner_key, endpoint_host): what the per-host cap counts
EVENTS = cast(Table, WebhookEvent.__table__)
INVOICES = cast(Table, Invoice.__table__)
API_KEYS = cast(Table, ApiKey.__table__)


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
    # Whose delivery it is (the per-owner cap), and its health key (owner and URL).
    owner_key: str = ""
    endpoint_key: str = ""


@dataclass
class InFlight:
    """A worker's claimed attempts (sending, or queued behind their host's cap), by owner and
    host and by owner: what the caps count; and the hosts that answer fast (``fast``), which
    may have a queue."""

    owner_hosts: Counter[OwnerHost] = field(default_factory=Counter)
    owners: Counter[str] = field(default_factory=Counter)
    # The hosts whose latest attempt was delivered fast, the latest last (at most FAST_HOSTS).
    fast: dict[str, None] = field(default_factory=dict)

    def add(self, event: ClaimedEvent) -> None:
        self.owner_hosts[event.owner_key, event.endpoint_host] += 1
        self.owners[event.owner_key] += 1

    def remove(self, event: ClaimedEvent) -> None:
        pair, owner = (event.owner_key, event.endpoint_host), event.owner_key
        self.owner_hosts[pair] -= 1
        self.owners[owner] -= 1
        if self.owner_hosts[pair] <= 0:
            del self.owner_hosts[pair]
        if self.owners[owner] <= 0:
            del self.owners[owner]

    def answered(self, host: str, fast: bool) -> None:
        """An attempt to ``host`` ended: delivered quickly (``fast``), or not."""
        self.fast.pop(host, None)
        if fast:
            self.fast[host] = None
            if len(self.fast) > FAST_HOSTS:
                del self.fast[next(iter(self.fast))]


def signed_delivery(event: ClaimedEvent, now_ms: int) -> Delivery:
    """The delivery as it goes out at ``now_ms``: with ``x-service-webhook-signature`` over
    its body bytes when the owner has active secrets (``t`` = this send time, in seconds)."""
    header = signature_header(event.signing_secrets, now_ms // 1000, event.delivery.body)
    if header is None:
        return event.delivery
    return event.delivery.with_header(WEBHOOK_SIGNATURE_HEADER, header)


@dataclass(frozen=True)
class Credential:
    """How an invoice was created, as its paid webhook repeats it (all None: no invoice)."""

    auth_mode: str | None = None
    auth_signature: str | None = None
    auth_timestamp: str | None = None


def event_headers(
    event_id: str, attempt: int, invoice: Credential | None, api_key: SecretStr | None
) -> dict[str, str]:
    """Headers of the paid webhook (docs/integration/webhooks.md): the creation credential
    (``api_key``: the unrevoked key that created it or its subscription), event id, attempt."""
    headers = {"content-type": "application/json"}
    if invoice is not None and api_key:
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
    services: Services, now_ms: int, limit: int, in_flight: InFlight | None = None
) -> list[ClaimedEvent]:
    """Lease up to ``limit`` due events (``limit``: the worker's free slots) and take their
    next attempt number (:func:`claim_batch`)."""
    return (await claim_batch(services, now_ms, limit, in_flight)).claimed


@dataclass(frozen=True)
class Batch:
    """What a claim took, and whether claiming again at once may find more (it read as many
    due rows as it could and took them all; a claim that read every due row, or left some
    out for the caps, waits for a slot to free up or new deliveries instead: claiming again
    at once would only read past the same rows)."""

    claimed: list[ClaimedEvent]
    more: bool


async def claim_batch(
    services: Services, now_ms: int, limit: int, in_flight: InFlight | None = None
) -> Batch:
    """Lease up to ``limit`` due events and take their next attempt number.

    Due events of failing endpoints come after everyone else's, each group oldest first (a
    failing endpoint's event waits so for at most one retry delay). The caps (:class:`Caps`)
    count ``in_flight`` (this worker's attempts); events over them stay unclaimed, and the
    owners and (owner, host) pairs already full are left out of the query, so the next due
    events of everyone else are found.
    """
    async with services.db.transaction() as session:
        return await claim_in(session, services, now_ms, limit, in_flight)


async def claim_in(
    session: AsyncSession,
    services: Services,
    now_ms: int,
    limit: int,
    in_flight: InFlight | None = None,
) -> Batch:
    """:func:`claim_batch` inside the caller's transaction (the worker's round writes the
    finished attempts and claims the next ones in one transaction)."""
    caps = Caps.of(services.settings)
    in_flight = in_flight or InFlight()
    settings = services.settings
    patience_ms = int(settings.webhook_retry_delay_s * 1000)
    lease_until = now_ms + int(settings.webhook_timeout_s * 1000) + LEASE_MARGIN_MS
    full = caps.full(in_flight, limit)
    fetch = caps.most_claimable(limit)
    # Core statements on the session's connection: the ORM's per-statement work is not
    # needed for plain rows, and a claim runs every round.
    connection = await session.connection()
    due = _due_events(now_ms, patience_ms, full, False).limit(fetch)
    rows = list(await connection.execute(due))
    if len(rows) < fetch:
        deferred = _due_events(now_ms, patience_ms, full, True)
        rows += await connection.execute(deferred.limit(fetch - len(rows)))
    ids = caps.within([(row[0], row[1], row[2]) for row in rows], in_flight, limit)
    more = len(rows) == fetch and len(ids) == len(rows)
    if not ids:
        return Batch([], more)
    await connection.execute(
        update(EVENTS)
        .where(EVENTS.c.id.in_(ids))
        .values(claimed_until=lease_until, attempts=EVENTS.c.attempts + 1)
    )
    return Batch(await _load_claimed(session, services, ids), more)


@dataclass(frozen=True)
class Caps:
    """What one host and one owner may hold of a worker's slots.

    A host has at most ``per_host`` attempts of each owner in flight (the thing that hangs);
    one that answers fast may have as many again claimed and queued behind them (``held``), so
    its slots are refilled at once while the worker's next round is still at the database. An
    owner holds its share (queued attempts count), ``per_owner``, whenever a slot is free;
    beyond it, only spare slots: it takes one more only while at least ``reserved`` slots (a
    quarter of the worker's) stay free. So one owner holds at most three quarters of the slots
    (or its share, if larger), whatever its endpoints do, and the last quarter always serves
    the owners within their share. An owner alone uses the spare three quarters: claims as
    large as without the caps (half the slots cost a lone owner 10-15% of its deliveries per
    CPU second in ``bench/webhooks.py``: claims and writes twice as many, half as large)."""

    per_host: int
    per_owner: int
    reserved: int
    queue: int = 0  # times ``per_host`` a fast host may have queued (``held``)

    @classmethod
    def of(cls, settings: Settings) -> Caps:
        queue = HOST_QUEUE if settings.webhook_timeout_s * 1000 < LEASE_MARGIN_MS else 0
        return cls(
            settings.webhook_per_host_concurrency,
            settings.webhook_per_owner_concurrency,
            settings.webhook_concurrency // 4,
            queue,
        )

    def held(self, host: str, in_flight: InFlight) -> int:
        """How many claimed attempts ``host`` may have: its cap, and for a host that answers
        fast (``InFlight.fast``) as many again queued behind it, so that its slots never wait
        for the worker's next round of the database (the queue starts as slots free up; a
        host that stops answering fast loses it)."""
        return self.per_host * (self.queue + 1) if host in in_flight.fast else self.per_host

    def full(self, in_flight: InFlight, free: int) -> tuple[list[OwnerHost], list[str]]:
        """((owner, host) pairs, owners) that can take no slot now, with ``free`` slots free."""
        held = in_flight.owner_hosts.items()
        pairs = sorted(pair for pair, n in held if n >= self.held(pair[1], in_flight))
        owners = sorted(o for o, n in in_flight.owners.items() if not self._takes(n, free))
        return pairs, owners

    def most_claimable(self, free: int) -> int:
        """How many rows a claim reads: the spare slots, plus one owner's share (owners within
        their share that are due beyond it are claimed at the next round, at once)."""
        return min(free, max(free - self.reserved, 0) + self.per_owner)

    def within(self, rows: list[tuple[str, str, str]], in_flight: InFlight, free: int) -> list[str]:
        """Ids of the candidates (id, host, owner), in order, leaving out any that would put
        its owner over its cap at its host, or over its share while too few slots are free."""
        pairs, owners = Counter(in_flight.owner_hosts), Counter(in_flight.owners)
        ids: dict[str, None] = {}
        for event_id, host, owner in rows:
            if event_id in ids or pairs[owner, host] >= self.held(host, in_flight):
                continue
            if free <= 0 or not self._takes(owners[owner], free):
                continue
            pairs[owner, host] += 1
            owners[owner] += 1
            free -= 1
            ids[event_id] = None
        return list(ids)

    def _takes(self, held: int, free: int) -> bool:
        """Whether an owner holding ``held`` slots may take one more of ``free``."""
        return held < self.per_owner or free - 1 >= self.reserved


def _due_events(
    now_ms: int, patience_ms: int, full: tuple[list[OwnerHost], list[str]], deferred: bool
) -> Select[str, str, str]:
    """Due, unclaimed events (oldest first, rows locked) of (owner, host) pairs and owners
    not ``full``; ``deferred``: of failing endpoints."""
    waiting = and_(endpoint_is_failing(), WebhookEvent.next_attempt_at > now_ms - patience_ms)
    conditions = [
        WebhookEvent.status == EventStatus.PENDING,
        WebhookEvent.next_attempt_at <= now_ms,
        WebhookEvent.claimed_until <= now_ms,
        waiting if deferred else not_(waiting),
    ]
    full_pairs, full_owners = full
    if full_pairs:
        pair = tuple_(WebhookEvent.owner_key, WebhookEvent.endpoint_host)
        conditions.append(pair.not_in(full_pairs))
    if full_owners:
        conditions.append(WebhookEvent.owner_key.not_in(full_owners))
    return (
        select(WebhookEvent.id, WebhookEvent.endpoint_host, WebhookEvent.owner_key)
        .where(*conditions)
        .order_by(WebhookEvent.next_attempt_at, WebhookEvent.id)
        .with_for_update(skip_locked=True)
    )


async def _load_claimed(
    session: AsyncSession, services: Services, ids: list[str]
) -> list[ClaimedEvent]:
    """The claimed rows with what their headers need, as plain rows (Core: no ORM objects
    per delivery, the claim is on the path of every webhook)."""
    events, invoices, keys = EVENTS.c, INVOICES.c, API_KEYS.c
    connection = await session.connection()
    rows = await connection.execute(
        select(
            events.id,
            events.attempts,
            events.endpoint_host,
            events.url,
            events.payload,
            events.endpoint_id,
            events.retry_until,
            events.owner_key,
            events.endpoint_key,
            invoices.auth_mode,
            invoices.auth_signature,
            invoices.auth_timestamp,
            keys.key_encrypted,
        )
        .select_from(EVENTS)
        .outerjoin(INVOICES, invoices.id == events.invoice_pk)
        # A revoked key is never sent again (the header is left out).
        .outerjoin(API_KEYS, and_(keys.id == invoices.api_key_id, keys.revoked_at.is_(None)))
        .where(events.id.in_(ids))
        .order_by(events.next_attempt_at, events.id)
    )
    loaded = list(rows)
    secret = ServerSecrets.of(services.settings)
    owners = {row.owner_key for row in loaded}
    options = await webhook_options_by_owner(session, owners, secret)
    claimed = []
    for row in loaded:
        owner = options.get(row.owner_key, DEFAULT_OPTIONS)
        send_key = row.key_encrypted and owner.api_key_header
        api_key = API_KEY.unseal(row.key_encrypted, secret) if send_key else None
        if row.endpoint_id is None:
            credential = Credential(row.auth_mode, row.auth_signature, row.auth_timestamp)
            headers = event_headers(row.id, row.attempts, credential, api_key)
        else:
            headers = endpoint_headers(row.payload["id"], row.attempts)
        claimed.append(
            ClaimedEvent(
                event_id=row.id,
                attempt=row.attempts,
                endpoint_host=row.endpoint_host,
                delivery=Delivery(row.url, encode_body(row.payload), headers, row.owner_key),
                signing_secrets=owner.secrets,
                endpoint_id=row.endpoint_id,
                retry_until=row.retry_until,
                owner_key=row.owner_key,
                endpoint_key=row.endpoint_key,
            )
        )
    return claimed
