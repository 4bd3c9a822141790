"""API keys: issued once, stored as a hash (lookup) plus an encrypted copy (webhook headers).

The copy is encrypted with Fernet under a key derived from ``INVOICING_SECRET`` with
HKDF-SHA256 (RFC 5869, info :data:`ENCRYPTION_INFO`). Keys stored before that were encrypted
under ``sha256(secret)``: they still decrypt (the old key is tried second), and
``invoicing migrate`` re-encrypts them under the HKDF key (:func:`reencrypt_legacy_keys`).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.models import ApiKey
from invoicing.db import Database, ProcessLocal
from invoicing.errors import NotFound

KEY_PREFIX = "sk_"


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


ENCRYPTION_INFO = b"invoicing api-key encryption v1"


def hkdf_sha256(ikm: bytes, salt: bytes | None, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt`` (zeros when None), expand with ``info``."""
    return HKDF(algorithm=SHA256(), length=length, salt=salt, info=info).derive(ikm)


@functools.lru_cache(maxsize=4)
def _fernets(secret: str) -> tuple[Fernet, MultiFernet]:
    """(the HKDF key, HKDF then the legacy sha256(secret) key) for ``secret``."""
    current = Fernet(
        base64.urlsafe_b64encode(hkdf_sha256(secret.encode(), None, ENCRYPTION_INFO, 32))
    )
    legacy = Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))
    return current, MultiFernet([current, legacy])


def encrypt_key(api_key: str, secret: SecretStr) -> str:
    return _fernets(secret.get_secret_value())[0].encrypt(api_key.encode()).decode()


def decrypt_key(encrypted: str, secret: SecretStr) -> str | None:
    """The API key in clear, whether stored under the HKDF key or the legacy one."""
    try:
        return _fernets(secret.get_secret_value())[1].decrypt(encrypted.encode()).decode()
    except InvalidToken:
        return None


async def reencrypt_legacy_keys(session: AsyncSession, secret: SecretStr) -> int:
    """Re-encrypt under the HKDF key every stored key still under the legacy key; returns
    how many. Keys that decrypt under neither (another secret) are left as they are."""
    current, both = _fernets(secret.get_secret_value())
    moved = 0
    for row in await session.scalars(select(ApiKey)):
        encrypted = row.key_encrypted.encode()
        try:
            current.decrypt(encrypted)
            continue
        except InvalidToken:
            pass
        try:
            row.key_encrypted = both.rotate(encrypted).decode()
        except InvalidToken:
            continue
        moved += 1
    return moved


async def create_api_key(
    session: AsyncSession, owner_address: str, label: str | None, secret: SecretStr, now_ms: int
) -> tuple[ApiKey, str]:
    """Issue a key for an owner; returns the row and the key in clear (shown once)."""
    api_key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        id=str(uuid.uuid4()),
        owner_address=owner_address,
        owner_key=owner_address.lower(),
        label=label,
        key_hash=hash_key(api_key),
        key_encrypted=encrypt_key(api_key, secret),
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


async def lookup_active_key(db: Database, api_key: str) -> ActiveKey | None:
    """The active key for ``api_key``: from the short-lived cache, else from the database.

    Concurrent misses for one key share a single read (when a busy key's entry expires,
    every request in flight would otherwise read the database at the same moment)."""
    cache = active_key_cache(db)
    key_hash = hash_key(api_key)
    found = cache.get(key_hash)
    if found is not None:
        return found
    reading = cache.reads.get(key_hash)
    if reading is None:
        reading = asyncio.ensure_future(_read_active_key(db, cache, key_hash))
        cache.reads[key_hash] = reading
        reading.add_done_callback(lambda done: cache.forget_read(key_hash, done))
    return await asyncio.shield(reading)


async def _read_active_key(db: Database, cache: ActiveKeyCache, key_hash: str) -> ActiveKey | None:
    generation = cache.generation
    async with db.sessions() as session:
        row = await session.execute(
            select(ApiKey.id, ApiKey.owner_key, ApiKey.revoked_at).where(
                ApiKey.key_hash == key_hash
            )
        )
        first = row.first()
    if first is None or first.revoked_at is not None:
        return None
    found = ActiveKey(id=first.id, owner_key=first.owner_key)
    cache.put(key_hash, found, generation)
    return found


async def list_api_keys(session: AsyncSession, owner_key: str) -> list[ApiKey]:
    rows = await session.scalars(
        select(ApiKey).where(ApiKey.owner_key == owner_key).order_by(ApiKey.created_at, ApiKey.id)
    )
    return list(rows)


async def revoke_api_key(session: AsyncSession, owner_key: str, key_id: str, now_ms: int) -> ApiKey:
    row = await session.scalar(
        select(ApiKey).where(ApiKey.id == key_id, ApiKey.owner_key == owner_key)
    )
    if row is None:
        raise NotFound("no such API key for this owner")
    if row.revoked_at is None:
        row.revoked_at = now_ms
    return row


def key_to_dict(row: ApiKey) -> dict[str, object]:
    return {
        "id": row.id,
        "label": row.label,
        "createdAt": row.created_at,
        "revokedAt": row.revoked_at,
    }
