"""API keys: issued once, stored as a hash (lookup) plus a sealed copy (webhook headers).

Issuing, sealing, listing and revoking are the owner-secret stack of ``auth.secrets``
(:data:`API_KEY`, stored in :data:`API_KEY_COLUMN`), shared with webhook signing secrets.
Keys stored before HKDF were sealed under ``sha256(secret)``: they still open, and
``invoicing migrate`` seals them again under the HKDF key (``auth.secrets.reseal_stored``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import SecretStr
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.secrets import (
    SealedColumn,
    SecretKind,
    ServerSecrets,
    list_owned,
    revoke_owned,
    secret_hash,
)
from invoicing.db import Database, ProcessLocal
from invoicing.tables.auth import ApiKey

API_KEY = SecretKind(
    noun="API key",
    prefix="sk_",
    encryption_info=b"invoicing api-key encryption v1",
    legacy_key=True,
)


API_KEY_COLUMN = SealedColumn(API_KEY, ApiKey, ApiKey.key_encrypted)


async def create_api_key(
    session: AsyncSession,
    owner_address: str,
    label: str | None,
    secret: ServerSecrets,
    now_ms: int,
) -> tuple[ApiKey, SecretStr]:
    """Issue a key for an owner; returns the row and the key (shown once)."""
    api_key = API_KEY.issue()
    row = ApiKey(
        id=str(uuid.uuid4()),
        owner_address=owner_address,
        owner_key=owner_address.lower(),
        label=label,
        key_hash=secret_hash(api_key.get_secret_value()),
        key_encrypted=API_KEY.seal(api_key, secret),
        created_at=now_ms,
    )
    session.add(row)
    await session.flush()
    return row, api_key


@dataclass(frozen=True)
class ActiveKey:
    """What authentication needs of an active key."""

    id: str
    owner_key: str


class ActiveKeyCache:
    """Key hash → active key, for at most ``ttl_s`` seconds, in this process only.

    Saves a read transaction per API-key request. A revocation made in this process drops
    the entry at once; one made by another process is seen here within ``ttl_s`` (1 s).
    Only active keys are cached, so a new key works at once everywhere. ``forget`` bumps a
    generation: a lookup that started before a revocation never stores its (stale) result.
    """

    def __init__(self, ttl_s: float = 1.0, max_entries: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.generation = 0
        self._entries: dict[str, tuple[float, ActiveKey]] = {}
        # Reads in flight, by key hash: concurrent misses wait for the same one.
        self.reads: dict[str, asyncio.Future[ActiveKey | None]] = {}

    def get(self, key_hash: str) -> ActiveKey | None:
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            self._entries.pop(key_hash, None)
            return None
        return entry[1]

    def put(self, key_hash: str, key: ActiveKey, generation: int) -> None:
        if generation != self.generation:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key_hash] = (time.monotonic() + self.ttl_s, key)

    def forget_read(self, key_hash: str, read: asyncio.Future[ActiveKey | None]) -> None:
        if self.reads.get(key_hash) is read:
            del self.reads[key_hash]

    def forget(self, key_hash: str) -> None:
        self.generation += 1
        self._entries.pop(key_hash, None)
        self.reads.pop(key_hash, None)


_ACTIVE_KEYS: ProcessLocal[ActiveKeyCache] = ProcessLocal(lambda _db: ActiveKeyCache())


def active_key_cache(db: Database) -> ActiveKeyCache:
    """This process's cache of ``db``'s active keys."""
    return _ACTIVE_KEYS.of(db)


# A key's last use is written at most this often (on a cache miss that finds it older).
LAST_USED_RESOLUTION_MS = 60_000


async def lookup_active_key(
    db: Database, api_key: str, now_ms: int | None = None
) -> ActiveKey | None:
    """The active key for ``api_key``: from the short-lived cache, else from the database.

    Concurrent misses for one key share a single read (when a busy key's entry expires,
    every request in flight would otherwise read the database at the same moment). With
    ``now_ms``, a read that finds the key's ``last_used_at`` a minute old or more moves it
    to now: the owner sees when each key was last used, to the minute, for at most one write
    per key, process and minute."""
    cache = active_key_cache(db)
    key_hash = secret_hash(api_key)
    found = cache.get(key_hash)
    if found is not None:
        return found
    reading = cache.reads.get(key_hash)
    if reading is None:
        reading = asyncio.ensure_future(_read_active_key(db, cache, key_hash, now_ms))
        cache.reads[key_hash] = reading
        reading.add_done_callback(lambda done: cache.forget_read(key_hash, done))
    return await asyncio.shield(reading)


async def _read_active_key(
    db: Database, cache: ActiveKeyCache, key_hash: str, now_ms: int | None
) -> ActiveKey | None:
    generation = cache.generation
    async with db.reads() as session:
        row = await session.execute(
            select(ApiKey.id, ApiKey.owner_key, ApiKey.revoked_at, ApiKey.last_used_at).where(
                ApiKey.key_hash == key_hash
            )
        )
        first = row.first()
    if first is None or first.revoked_at is not None:
        return None
    last = first.last_used_at
    if now_ms is not None and (last is None or now_ms - last >= LAST_USED_RESOLUTION_MS):
        moved = update(ApiKey).where(ApiKey.id == first.id).values(last_used_at=now_ms)
        await db.run_statement(lambda connection: connection.execute(moved))
    found = ActiveKey(id=first.id, owner_key=first.owner_key)
    cache.put(key_hash, found, generation)
    return found


async def list_api_keys(session: AsyncSession, owner_key: str) -> Sequence[ApiKey]:
    return await list_owned(session, ApiKey, owner_key)


async def revoke_api_key(session: AsyncSession, owner_key: str, key_id: str, now_ms: int) -> ApiKey:
    return await revoke_owned(session, API_KEY, ApiKey, owner_key, key_id, now_ms)
