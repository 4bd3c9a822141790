"""API keys: issued once, stored as a hash (lookup) plus an encrypted copy (webhook headers)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.models import ApiKey
from invoicing.errors import NotFound

KEY_PREFIX = "sk_"


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def _fernet(secret: str) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))


def encrypt_key(api_key: str, secret: str) -> str:
    return _fernet(secret).encrypt(api_key.encode()).decode()


def decrypt_key(encrypted: str, secret: str) -> str | None:
    try:
        return _fernet(secret).decrypt(encrypted.encode()).decode()
    except InvalidToken:
        return None


async def create_api_key(
    session: AsyncSession, owner_address: str, label: str | None, secret: str, now_ms: int
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


async def find_active_key(session: AsyncSession, api_key: str) -> ApiKey | None:
    row = await session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(api_key)))
    if row is None or row.revoked_at is not None:
        return None
    return row


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
