"""Authenticating a request in either mode (docs/integration/authentication.md)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, delete

from invoicing.auth.api_keys import lookup_active_key
from invoicing.auth.signatures import QueryTypes, signed_by
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal, upsert
from invoicing.errors import (
    Forbidden,
    ReplayedRequest,
    TimestampOutOfWindow,
    Unauthorized,
)
from invoicing.tables.auth import UsedRequestTimestamp

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
    # A signed request authenticated with ``record_use=False``: its timestamp is not recorded
    # yet, and the replay key to record (with ``record_uses_in``, in the transaction of the
    # request's own writes) expires at this time.
    replay_expires_at: int | None = None

    def replay_key(self) -> Use | None:
        """(owner, timestamp, expires) still to record, or None."""
        if self.replay_expires_at is None or self.timestamp is None:
            return None
        return (self.owner_key, int(self.timestamp), self.replay_expires_at)


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
    record_use: bool = True,
) -> Caller:
    """Check the request's credential against its ownerAddress; raise on any failure.

    A signed request's timestamp is accepted once per owner: recorded here in its own
    transaction, or, with ``record_use=False``, by the caller in the transaction of the
    request's writes (``Caller.replay_key``, ``record_uses_in``), so the request costs one
    transaction and a refused one records nothing."""
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
    return await _by_signature(db, signature, timestamp, request, now_ms, window_s, record_use)


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
    record_use: bool,
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
    expires_at = now_ms + window_s * 1000 * 2
    if not record_use:
        return Caller(
            owner_key=owner_key,
            mode="signature",
            signature=signature,
            timestamp=timestamp,
            replay_expires_at=expires_at,
        )
    await _consume_timestamp(db, owner_key, ts, expires_at)
    return Caller(owner_key=owner_key, mode="signature", signature=signature, timestamp=timestamp)


async def _consume_timestamp(db: Database, owner_key: str, ts: int, expires_at: int) -> None:
    """Accept (owner, timestamp) once, across every API process sharing the database."""
    if not await _REPLAY_GUARD.of(db).submit((owner_key, ts, expires_at)):
        raise replayed()


Use = tuple[str, int, int]  # owner key, timestamp, expires at


# Concurrent signed requests of this process record their timestamps in one transaction.
_REPLAY_GUARD: ProcessLocal[Coalescer[Use, bool]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_record_uses, db))
)


async def _record_uses(db: Database, uses: Sequence[Use]) -> list[bool | Exception]:
    return list(await db.run_batch(functools.partial(record_uses_in, uses=uses)))


def record_uses_in(connection: Connection, uses: Sequence[Use]) -> list[bool]:
    """Record the uses in the connection's transaction: True for each use that was new;
    False for a replay (stored before, or earlier in ``uses``). The database's primary key
    decides, so this holds across processes; rolling the transaction back forgets them."""
    fresh: dict[tuple[str, int], int] = {}
    for index, (owner_key, ts, _expires) in enumerate(uses):
        fresh.setdefault((owner_key, ts), index)
    rows = [
        {"owner_key": uses[i][0], "timestamp_ms": uses[i][1], "expires_at": uses[i][2]}
        for i in fresh.values()
    ]
    stored = _insert_new(connection, rows)
    return [
        fresh[(owner_key, ts)] == index and (owner_key, ts) in stored
        for index, (owner_key, ts, _expires) in enumerate(uses)
    ]


def forget_uses_in(connection: Connection, uses: Sequence[Use]) -> None:
    """Delete uses recorded earlier in the same transaction (their requests were refused)."""
    table = cast(Table, UsedRequestTimestamp.__table__)
    for owner_key, ts, _expires in uses:
        connection.execute(
            delete(table).where(table.c.owner_key == owner_key, table.c.timestamp_ms == ts)
        )


def replayed() -> ReplayedRequest:
    return ReplayedRequest("this timestamp was already used by this owner")


def _insert_new(connection: Connection, rows: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """Store the rows whose (owner, timestamp) is not stored yet, in one statement
    (INSERT … ON CONFLICT DO NOTHING RETURNING); returns those stored."""
    stored = connection.execute(_record_statement(connection.dialect.name), rows)
    return {(str(owner_key), int(ts)) for owner_key, ts in stored}


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
