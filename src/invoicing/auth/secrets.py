"""Owner secrets: API keys and webhook signing secrets, one stack for both.

A secret is issued once (:meth:`SecretKind.issue`: the kind's prefix and 256 random bits,
URL-safe) and shown in clear only in the answer that creates it; everywhere else it travels
as a ``SecretStr``, so it never lands in a repr or a log line. At rest it is a Fernet token
(:meth:`SecretKind.seal`) under a key derived from ``INVOICING_SECRET`` with HKDF-SHA256
(RFC 5869), each kind with its own info string, so a token of one kind never opens as the
other. API keys stored before HKDF were sealed under ``sha256(INVOICING_SECRET)``: their kind
still opens those (``legacy_key``) and :meth:`SecretKind.reseal` moves them to the HKDF key.
An API key is also stored as its SHA-256 (:func:`secret_hash`): how a presented key is found.

The server's secrets change (docs/operations/configuration.md#rotating-invoicing_secret):
:class:`ServerSecrets` holds ``INVOICING_SECRET``, which seals and opens, and during a rotation
``INVOICING_NEXT_SECRET`` and ``INVOICING_PREVIOUS_SECRET``, which only open: every host can
read what any other seals while they restart one by one onto the new secret. Only
``invoicing secrets reencrypt``, run once every host seals under the new one, seals every
stored token again under it (:func:`reseal_stored`): ``invoicing migrate`` runs on the first
host restarted and never does, or the hosts not yet restarted could no longer read them.
Every process that uses stored secrets refuses to start while an active one opens under none
(:func:`unreadable_stored`), instead of sending webhooks without their API key or signature;
``invoicing secrets forget-unreadable`` revokes those whose secret is lost
(:func:`revoke_unreadable`).

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
from typing import Protocol, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from invoicing.errors import NotFound
from invoicing.tables.auth import OwnedSecret

# Random bytes in a secret (43 URL-safe characters after the prefix).
SECRET_BYTES = 32


class _SecretSettings(Protocol):
    """What :meth:`ServerSecrets.of` reads of the settings."""

    @property
    def secret(self) -> SecretStr: ...

    @property
    def previous_secret(self) -> SecretStr | None: ...

    @property
    def next_secret(self) -> SecretStr | None: ...


@dataclass(frozen=True)
class ServerSecrets:
    """``INVOICING_SECRET`` (``current``: seals and opens) and, while a rotation is under
    way, ``INVOICING_PREVIOUS_SECRET`` (``previous``) and ``INVOICING_NEXT_SECRET``
    (``next``), which only open."""

    current: SecretStr
    previous: SecretStr | None = None
    next: SecretStr | None = None

    @classmethod
    def of(cls, settings: _SecretSettings) -> ServerSecrets:
        return cls(settings.secret, settings.previous_secret, settings.next_secret)

    def values(self) -> tuple[str, ...]:
        others = (secret for secret in (self.previous, self.next) if secret is not None)
        return (self.current.get_secret_value(), *(secret.get_secret_value() for secret in others))


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

    def seal(self, secret: SecretStr, server: ServerSecrets) -> str:
        current, _ = _fernets(self, server.values())
        return current.encrypt(secret.get_secret_value().encode()).decode()

    def unseal(self, token: str, server: ServerSecrets) -> SecretStr | None:
        """The secret in clear; None if it was sealed under another server secret."""
        _, any_key = _fernets(self, server.values())
        try:
            return SecretStr(any_key.decrypt(token.encode()).decode())
        except InvalidToken:
            return None

    def reseal(self, token: str, server: ServerSecrets) -> str | None:
        """``token`` sealed again under the current HKDF key when it opens under another key
        (the legacy one, or the previous or next secret's); None when it already is under the
        current HKDF key, or opens under none (a secret no longer configured)."""
        current, any_key = _fernets(self, server.values())
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
def _fernets(kind: SecretKind, secrets: tuple[str, ...]) -> tuple[Fernet, Fernet | MultiFernet]:
    """(the current secret's HKDF key; every key that opens this kind's tokens, that one
    first, then its legacy key, then the previous and next secrets')."""
    keys = [key for secret in secrets for key in _keys(kind, secret)]
    return keys[0], keys[0] if len(keys) == 1 else MultiFernet(keys)


def _keys(kind: SecretKind, server_secret: str) -> list[Fernet]:
    key = hkdf_sha256(server_secret.encode(), None, kind.encryption_info, 32)
    keys = [Fernet(base64.urlsafe_b64encode(key))]
    if kind.legacy_key:
        legacy = hashlib.sha256(server_secret.encode()).digest()
        keys.append(Fernet(base64.urlsafe_b64encode(legacy)))
    return keys


def secret_hash(secret: str) -> str:
    """SHA-256 of a secret as presented, hex: how a stored API key is looked up."""
    return hashlib.sha256(secret.encode()).hexdigest()


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


@dataclass(frozen=True)
class SealedColumn:
    """Where one kind of owner secret is stored sealed: a token column of an
    :class:`OwnedSecret` model."""

    kind: SecretKind
    model: type[OwnedSecret]
    token: InstrumentedAttribute[str]


async def unreadable_stored(
    session: AsyncSession, sealed: SealedColumn, server: ServerSecrets
) -> int:
    """How many active (unrevoked) secrets of ``sealed`` open under none of the server's
    secrets: sealed under an ``INVOICING_SECRET`` that is no longer configured."""
    model = sealed.model
    tokens = await session.scalars(select(sealed.token).where(model.revoked_at.is_(None)))
    return sum(1 for token in tokens if sealed.kind.unseal(token, server) is None)


async def reseal_stored(session: AsyncSession, sealed: SealedColumn, server: ServerSecrets) -> int:
    """Seal again under the current secret every stored token of ``sealed`` that opens under
    another key (legacy, ``INVOICING_PREVIOUS_SECRET`` or ``INVOICING_NEXT_SECRET``); returns
    how many. Tokens that open under none are left as they are."""
    model = sealed.model
    moved = 0
    for secret_id, token in await session.execute(select(model.id, sealed.token)):
        resealed = sealed.kind.reseal(token, server)
        if resealed is not None:
            await session.execute(
                update(model).where(model.id == secret_id).values({sealed.token: resealed})
            )
            moved += 1
    return moved


@dataclass(frozen=True)
class Forgotten:
    """A stored secret revoked because it opens under no configured secret."""

    kind: SecretKind
    secret_id: str
    owner_key: str


async def revoke_unreadable(
    session: AsyncSession, sealed: SealedColumn, server: ServerSecrets, now_ms: int
) -> list[Forgotten]:
    """Revoke every active secret of ``sealed`` that opens under none of the server's secrets
    (its secret is lost: kept, it would only block every start), oldest first; readable ones
    are left as they are."""
    model = sealed.model
    rows = await session.execute(
        select(model.id, model.owner_key, sealed.token)
        .where(model.revoked_at.is_(None))
        .order_by(model.created_at, model.id)
    )
    forgotten = [
        Forgotten(sealed.kind, secret_id, owner_key)
        for secret_id, owner_key, token in rows
        if sealed.kind.unseal(token, server) is None
    ]
    if forgotten:
        await session.execute(
            update(model)
            .where(model.id.in_([row.secret_id for row in forgotten]))
            .values(revoked_at=now_ms)
        )
    return forgotten
