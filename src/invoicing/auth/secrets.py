"""Owner secrets: API keys and webhook signing secrets, one stack for both.

A secret is issued once (:meth:`SecretKind.issue`: the kind's prefix and 256 random bits,
URL-safe) and shown in clear only in the answer that creates it; everywhere else it travels
as a ``SecretStr``, so it never lands in a repr or a log line. At rest it is a Fernet token
(:meth:`SecretKind.seal`) under a key derived from ``INVOICING_SECRET`` with HKDF-SHA256
(RFC 5869), each kind with its own info string, so a token of one kind never opens as the
other. API keys stored before HKDF were sealed under ``sha256(INVOICING_SECRET)``: their kind
still opens those (``legacy_key``) and :meth:`SecretKind.reseal` moves them to the HKDF key.
An API key is also stored as its SHA-256 (:func:`secret_hash`): how a presented key is found.

Both are rows of an owner with the :class:`OwnedSecret` columns: listed oldest first, revoked
ones included (:func:`list_owned`); revoked by their owner only, another owner's id being 404
like an unknown one, and revoking twice keeps the first time (:func:`revoke_owned`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr
from sqlalchemy import BigInteger, String, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.errors import NotFound

# Random bytes in a secret (43 URL-safe characters after the prefix).
SECRET_BYTES = 32


@dataclass(frozen=True)
class SecretKind:
    """One kind of owner secret: how it looks, and how it is sealed at rest."""

    noun: str  # in messages: "API key", "webhook secret"
    prefix: str
    encryption_info: bytes
    # Also open tokens sealed under sha256(INVOICING_SECRET), the key before HKDF.
    legacy_key: bool = False

    def issue(self) -> SecretStr:
        return SecretStr(self.prefix + secrets.token_urlsafe(SECRET_BYTES))

    def seal(self, secret: SecretStr, server_secret: SecretStr) -> str:
        current, _ = _fernets(self, server_secret.get_secret_value())
        return current.encrypt(secret.get_secret_value().encode()).decode()

    def unseal(self, token: str, server_secret: SecretStr) -> SecretStr | None:
        """The secret in clear; None if it was sealed under another server secret."""
        _, any_key = _fernets(self, server_secret.get_secret_value())
        try:
            return SecretStr(any_key.decrypt(token.encode()).decode())
        except InvalidToken:
            return None

    def reseal(self, token: str, server_secret: SecretStr) -> str | None:
        """``token`` sealed again under the HKDF key when it is under the legacy key; None
        when it already is under the HKDF key, or opens under neither (another secret)."""
        current, any_key = _fernets(self, server_secret.get_secret_value())
        try:
            current.decrypt(token.encode())
            return None
        except InvalidToken:
            pass
        if not isinstance(any_key, MultiFernet):
            return None
        try:
            return any_key.rotate(token.encode()).decode()
        except InvalidToken:
            return None


def hkdf_sha256(ikm: bytes, salt: bytes | None, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt`` (zeros when None), expand with ``info``."""
    return HKDF(algorithm=SHA256(), length=length, salt=salt, info=info).derive(ikm)


@functools.lru_cache(maxsize=8)
def _fernets(kind: SecretKind, server_secret: str) -> tuple[Fernet, Fernet | MultiFernet]:
    """(the HKDF key; every key that opens this kind's tokens, the HKDF key first)."""
    key = hkdf_sha256(server_secret.encode(), None, kind.encryption_info, 32)
    current = Fernet(base64.urlsafe_b64encode(key))
    if not kind.legacy_key:
        return current, current
    legacy = Fernet(base64.urlsafe_b64encode(hashlib.sha256(server_secret.encode()).digest()))
    return current, MultiFernet([current, legacy])


def secret_hash(secret: str) -> str:
    """SHA-256 of a secret as presented, hex: how a stored API key is looked up."""
    return hashlib.sha256(secret.encode()).hexdigest()


class OwnedSecret:
    """The columns every owner secret's row has (a declarative mixin)."""

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    created_at: Mapped[int] = mapped_column(BigInteger)
    revoked_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


Row = TypeVar("Row", bound=OwnedSecret)


async def list_owned(session: AsyncSession, model: type[Row], owner_key: str) -> Sequence[Row]:
    """Every secret of the owner (lowercased key), revoked ones included, oldest first."""
    rows = await session.scalars(
        select(model).where(model.owner_key == owner_key).order_by(model.created_at, model.id)
    )
    return rows.all()


async def revoke_owned(
    session: AsyncSession,
    kind: SecretKind,
    model: type[Row],
    owner_key: str,
    secret_id: str,
    now_ms: int,
) -> Row:
    """Revoke one of the owner's secrets (404 if not theirs); revoking twice keeps the first
    time."""
    row = await session.scalar(
        select(model).where(model.id == secret_id, model.owner_key == owner_key)
    )
    if row is None:
        raise NotFound(f"no such {kind.noun} for this owner")
    if row.revoked_at is None:
        row.revoked_at = now_ms
    return row
