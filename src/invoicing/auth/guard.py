"""Authenticating a request in either mode (docs/integration/authentication.md)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, delete

from invoicing.auth.api_keys import lookup_active_key
from invoicing.auth.models import UsedRequestTimestamp
from invoicing.auth.signatures import QueryTypes, signed_by
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal, upsert
from invoicing.errors import (
    Forbidden,
    ReplayedRequest,
    TimestampOutOfWindow,
    Unauthorized,
)

API_KEY_HEADER = "x-service-api-key"
SIGNATURE_HEADER = "x-service-signature"
TIMESTAMP_HEADER = "x-service-timestamp"


@dataclass(frozen=True)
class Caller:
    """Who made a request, and with which credential (the webhook echoes it)."""

    owner_key: str
    mode: str  # "api_key" or "signature"
    api_key_id: str | None = None
    signature: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class SignedRequest:
    """What a signature must cover: the action, the owner as sent, and the payload (the
    body without ownerAddress, or the query without it with ``query_types``, the route's
    query parameter types, by which its values may also be signed typed)."""

    action: str
    owner_address: str
    payload: dict[str, Any]
    query_types: QueryTypes | None = None


async def authenticate(
    db: Database,
    headers: Mapping[str, str],
    request: SignedRequest,
    now_ms: int,
    window_s: int,
    allow_api_key: bool = True,
) -> Caller:
    """Check the request's credential against its ownerAddress; raise on any failure."""
    api_key = headers.get(API_KEY_HEADER)
    signature = headers.get(SIGNATURE_HEADER)
    timestamp = headers.get(TIMESTAMP_HEADER)
    if api_key is not None and (signature is not None or timestamp is not None):
        raise Unauthorized("send either an API key or a request signature, not both")
    if api_key is not None:
        if not allow_api_key:
            raise Unauthorized("this endpoint needs a request signature by the owner wallet")
        return await _by_api_key(db, api_key, request.owner_address, now_ms)
    if signature is None or timestamp is None:
        raise Unauthorized(
            "missing credentials: send x-service-api-key, or x-service-signature "
            "with x-service-timestamp"
        )
    return await _by_signature(db, signature, timestamp, request, now_ms, window_s)


async def _by_api_key(db: Database, api_key: str, owner_address: str, now_ms: int) -> Caller:
    row = await lookup_active_key(db, api_key, now_ms)
    if row is None:
        raise Unauthorized("invalid API key")
    if row.owner_key != owner_address.lower():
        raise Forbidden("this API key does not belong to ownerAddress")
    return Caller(owner_key=row.owner_key, mode="api_key", api_key_id=row.id)


def _parse_timestamp(timestamp: str) -> int:
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 16:
        raise Unauthorized("x-service-timestamp must be unix time in milliseconds")
    return int(timestamp)


async def _by_signature(
    db: Database,
    signature: str,
    timestamp: str,
    request: SignedRequest,
    now_ms: int,
    window_s: int,
) -> Caller:
    ts = _parse_timestamp(timestamp)
    if abs(now_ms - ts) > window_s * 1000:
        raise TimestampOutOfWindow(
            "x-service-timestamp is more than 5 minutes from server time",
            {"serverTime": now_ms},
        )
    if len(signature) > 200 or not signed_by(
        request.owner_address, signature, request.action, ts, request.payload, request.query_types
    ):
        raise Unauthorized("the request signature does not match ownerAddress and the request")
    owner_key = request.owner_address.lower()
    await _consume_timestamp(db, owner_key, ts, now_ms + window_s * 1000 * 2)
    return Caller(owner_key=owner_key, mode="signature", signature=signature, timestamp=timestamp)


async def _consume_timestamp(db: Database, owner_key: str, ts: int, expires_at: int) -> None:
    """Accept (owner, timestamp) once, across every API process sharing the database."""
    if not await _REPLAY_GUARD.of(db).submit((owner_key, ts, expires_at)):
        raise ReplayedRequest("this timestamp was already used by this owner")


_Use = tuple[str, int, int]


# Concurrent signed requests of this process record their timestamps in one transaction.
_REPLAY_GUARD: ProcessLocal[Coalescer[_Use, bool]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_record_uses, db))
)


async def _record_uses(db: Database, uses: Sequence[_Use]) -> list[bool | Exception]:
    """True for each use that was new; False for a replay (stored before, or earlier in
    the same batch). The database's primary key decides, so this holds across processes."""
    fresh: dict[tuple[str, int], int] = {}
    for index, (owner_key, ts, _expires) in enumerate(uses):
        fresh.setdefault((owner_key, ts), index)
    rows = [
        {"owner_key": uses[i][0], "timestamp_ms": uses[i][1], "expires_at": uses[i][2]}
        for i in fresh.values()
    ]
    stored = await db.run_batch(functools.partial(_insert_new, rows=rows))
    return [
        fresh[(owner_key, ts)] == index and (owner_key, ts) in stored
        for index, (owner_key, ts, _expires) in enumerate(uses)
    ]


def _insert_new(connection: Connection, rows: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """Store the rows whose (owner, timestamp) is not stored yet; returns those stored."""
    if connection.dialect.name != "sqlite":
        stored = connection.execute(_record_statement(connection.dialect.name), rows)
        return {(str(owner_key), int(ts)) for owner_key, ts in stored}
    # SQLite: the transaction holds the write lock, so what is not stored now is ours to
    # store; the driver's executemany then writes them without per-row SQLAlchemy work.
    pairs = json.dumps([[row["owner_key"], row["timestamp_ms"]] for row in rows])
    taken = {
        (str(owner_key), int(ts))
        for owner_key, ts in connection.exec_driver_sql(_SQLITE_TAKEN, (pairs,))
    }
    new = [row for row in rows if (row["owner_key"], row["timestamp_ms"]) not in taken]
    if new:
        values = [(row["owner_key"], row["timestamp_ms"], row["expires_at"]) for row in new]
        connection.exec_driver_sql(_SQLITE_INSERT, values)
    return {(row["owner_key"], row["timestamp_ms"]) for row in new}


_SQLITE_TAKEN = (
    "SELECT u.owner_key, u.timestamp_ms FROM json_each(?) AS j "
    "JOIN used_request_timestamps AS u "
    "ON u.owner_key = json_extract(j.value, '$[0]') "
    "AND u.timestamp_ms = json_extract(j.value, '$[1]')"
)
_SQLITE_INSERT = (
    "INSERT INTO used_request_timestamps (owner_key, timestamp_ms, expires_at) VALUES (?, ?, ?)"
)


@functools.cache
def _record_statement(dialect: str) -> Any:
    """One compiled statement for every batch size (executed with a list of rows)."""
    table = cast(Table, UsedRequestTimestamp.__table__)
    return (
        upsert(dialect, table)
        .on_conflict_do_nothing(index_elements=[table.c.owner_key, table.c.timestamp_ms])
        .returning(table.c.owner_key, table.c.timestamp_ms)
    )


async def purge_used_timestamps(db: Database, now_ms: int) -> None:
    """Forget replay keys that can no longer pass the time window."""
    async with db.transaction() as session:
        await session.execute(
            delete(UsedRequestTimestamp).where(UsedRequestTimestamp.expires_at < now_ms)
        )
