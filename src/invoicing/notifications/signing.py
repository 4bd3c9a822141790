"""Signed webhook deliveries: each owner's signing secrets, their webhook settings, the header.

While an owner has active secrets, every delivery to that owner carries
``x-service-webhook-signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]``, one ``v1`` per active
secret (oldest first), each ``HMAC-SHA256(key = the whole secret "whsec_…" as UTF-8,
message = "<t>.<raw body>")``: a receiver that knows any one active secret can check the
delivery, so a secret is rotated by creating the new one, switching the receiver, then
revoking the old one. ``t`` is the send time, so a receiver can refuse old (replayed) ones.

Secrets are issued, sealed, listed and revoked by the owner-secret stack of ``auth.secrets``
(:data:`WEBHOOK_SECRET`), shared with API keys: shown in clear only in the answer that
creates them, ``SecretStr`` everywhere else.

``owner_settings`` holds what an owner chose about their webhooks: ``webhookApiKeyHeader``
(default true) says whether API-key-created invoices' webhooks carry ``x-service-api-key``;
and ``underpaymentToleranceBps`` (default 0, at most 500), the share of the amount due a
payment may fall short by and still pay a new invoice (docs/integration/pricing.md); and
``reportingCurrency`` (default none), the ISO 4217 currency the dashboard shows amounts and
totals in beside the token amounts (docs/dashboard.md).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr
from sqlalchemy import (
    BigInteger,
    BindParameter,
    Boolean,
    Connection,
    Select,
    String,
    Text,
    bindparam,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.secrets import SealedColumn, SecretKind, ServerSecrets, list_owned, revoke_owned
from invoicing.db import upsert
from invoicing.errors import InvalidRequest, TooManyWebhookSecrets
from invoicing.pricing.currencies import parse_currency
from invoicing.tables.notifications import OwnerSettings, WebhookSecret

log = logging.getLogger(__name__)

WEBHOOK_SIGNATURE_HEADER = "x-service-webhook-signature"
WEBHOOK_SECRET = SecretKind(
    noun="webhook secret",
    prefix="whsec_",
    encryption_info=b"invoicing webhook-secret encryption v1",
)
WEBHOOK_SECRET_COLUMN = SealedColumn(WEBHOOK_SECRET, WebhookSecret, WebhookSecret.secret_encrypted)
# Active secrets an owner may hold at once (two are enough to rotate; a few spare).
MAX_ACTIVE_SECRETS = 5


# ---- the header -------------------------------------------------------------------------


def signature_header(secrets: Sequence[SecretStr], timestamp: int, body: bytes) -> str | None:
    """The ``x-service-webhook-signature`` value for ``body`` sent at ``timestamp`` (unix
    seconds), one ``v1`` per secret; None without secrets (then no header is sent)."""
    if not secrets:
        return None
    message = b"%d.%s" % (timestamp, body)
    parts = [f"t={timestamp}"]
    for secret in secrets:
        mac = _keyed(secret.get_secret_value()).copy()
        mac.update(message)
        parts.append("v1=" + mac.hexdigest())
    return ",".join(parts)


@functools.lru_cache(maxsize=1024)
def _keyed(secret: str) -> hmac.HMAC:
    """HMAC-SHA256 keyed with ``secret`` (as UTF-8) and fed nothing yet: the key is set up
    once per process, and each message is signed on a ``copy()``. Which secrets sign a
    delivery is always what the database said for its batch; an entry only saves the work."""
    return hmac.new(secret.encode(), digestmod=hashlib.sha256)


# ---- the secrets ------------------------------------------------------------------------


async def active_secrets(
    session: AsyncSession, owner: str, server_secret: ServerSecrets
) -> tuple[SecretStr, ...]:
    """The owner's active signing secrets, oldest first (empty: deliveries unsigned)."""
    options = await webhook_options_by_owner(session, [owner], server_secret)
    return options.get(owner.lower(), WebhookOptions()).secrets


def _readable(owner_key: str, encrypted: str, server_secret: ServerSecrets) -> SecretStr | None:
    secret = _unsealed(encrypted, server_secret)
    if secret is None:
        # Stored under another INVOICING_SECRET: this owner's deliveries go out without it.
        log.warning(
            "a webhook secret of %s cannot be decrypted (INVOICING_SECRET changed?)", owner_key
        )
    return secret


async def create_secret(
    session: AsyncSession, owner: str, server_secret: ServerSecrets, now_ms: int
) -> tuple[WebhookSecret, SecretStr]:
    """Issue a signing secret; returns the row and the secret (shown once).

    Refused (409 ``too_many_webhook_secrets``) when the owner already has
    :data:`MAX_ACTIVE_SECRETS` active ones. The owner's settings row is locked first, so
    concurrent creates on several processes count one after the other."""
    owner_key = owner.lower()
    await lock_owner(session, owner_key, now_ms)
    active = await session.scalar(
        select(func.count())
        .select_from(WebhookSecret)
        .where(WebhookSecret.owner_key == owner_key, WebhookSecret.revoked_at.is_(None))
    )
    if (active or 0) >= MAX_ACTIVE_SECRETS:
        raise TooManyWebhookSecrets(
            f"an owner may have at most {MAX_ACTIVE_SECRETS} active webhook secrets; "
            "revoke one first",
            {"maxActive": MAX_ACTIVE_SECRETS},
        )
    secret = WEBHOOK_SECRET.issue()
    row = WebhookSecret(
        id=str(uuid.uuid4()),
        owner_key=owner_key,
        secret_encrypted=WEBHOOK_SECRET.seal(secret, server_secret),
        created_at=now_ms,
    )
    session.add(row)
    await session.flush()
    return row, secret


async def list_secrets(session: AsyncSession, owner: str) -> Sequence[WebhookSecret]:
    """Every secret of the owner, revoked ones included, oldest first."""
    return await list_owned(session, WebhookSecret, owner.lower())


async def revoke_secret(
    session: AsyncSession, owner: str, secret_id: str, now_ms: int
) -> WebhookSecret:
    """Stop signing with one of the owner's secrets (404 if not theirs; revoking twice keeps
    the first time)."""
    return await revoke_owned(
        session, WEBHOOK_SECRET, WebhookSecret, owner.lower(), secret_id, now_ms
    )


@functools.lru_cache(maxsize=1024)
def _unsealed(encrypted: str, server_secret: ServerSecrets) -> SecretStr | None:
    """``WEBHOOK_SECRET.unseal``, kept per process: each claimed batch reads its owners'
    sealed secrets, and opening the same token under the same server secrets always gives
    the same secret. Keyed by the stored token itself, as the batch query read it: a revoked
    secret is no longer read, a resealed one is a new token."""
    return WEBHOOK_SECRET.unseal(encrypted, server_secret)


# ---- owner settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookOptions:
    """What a delivery to one owner needs: whether to send the API key, and the secrets."""

    api_key_header: bool = True
    secrets: tuple[SecretStr, ...] = ()


async def webhook_options_by_owner(
    session: AsyncSession, owners: Collection[str], server_secret: ServerSecrets
) -> dict[str, WebhookOptions]:
    """Each owner's :class:`WebhookOptions`, keyed by lowercased owner, in one query for a
    whole claimed batch (secrets and settings together); owners with neither are left out
    (use ``WebhookOptions()``, the defaults)."""
    keys = sorted({owner.lower() for owner in owners})
    if not keys:
        return {}
    rows = await session.execute(_options_statement(), {"owner_keys": keys})
    found: dict[str, tuple[bool, list[SecretStr]]] = {}
    for owner_key, encrypted, api_key_header, _created_at, _id in rows:
        header, secrets = found.setdefault(owner_key, (True, []))
        if api_key_header is not None:
            found[owner_key] = (bool(api_key_header), secrets)
        elif (secret := _readable(owner_key, encrypted, server_secret)) is not None:
            secrets.append(secret)
    return {
        owner_key: WebhookOptions(api_key_header=header, secrets=tuple(secrets))
        for owner_key, (header, secrets) in found.items()
    }


@functools.cache
def _options_statement() -> Select[Any]:
    """The query of ``webhook_options_by_owner``, built once (the owners are a parameter):
    building it, and its cache key, cost more than running it for a claimed batch."""
    keys: BindParameter[list[str]] = bindparam("owner_keys", expanding=True)
    secrets_ = select(
        WebhookSecret.owner_key.label("owner_key"),
        WebhookSecret.secret_encrypted.label("encrypted"),
        null().cast(Boolean).label("api_key_header"),
        WebhookSecret.created_at.label("created_at"),
        WebhookSecret.id.label("id"),
    ).where(WebhookSecret.owner_key.in_(keys), WebhookSecret.revoked_at.is_(None))
    settings = select(
        OwnerSettings.owner_key,
        null().cast(Text),
        OwnerSettings.webhook_api_key_header,
        literal(0, BigInteger),
        literal("", String),
    ).where(OwnerSettings.owner_key.in_(keys))
    both = union_all(secrets_, settings).subquery()
    return select(both).order_by(both.c.owner_key, both.c.created_at, both.c.id)


# The highest underpayment tolerance an owner may set: 5% (docs/integration/pricing.md).
MAX_TOLERANCE_BPS = 500
# An owner's capture window: 7 days unless chosen, from an hour to 30 days
# (docs/integration/invoices.md#manual-capture).
DEFAULT_CAPTURE_WINDOW_S = 7 * 86_400
MIN_CAPTURE_WINDOW_S = 3_600
MAX_CAPTURE_WINDOW_S = 30 * 86_400


@dataclass(frozen=True)
class OwnerChoices:
    """What an owner chose about their webhooks and the underpayment they accept (the
    defaults until they choose)."""

    webhook_api_key_header: bool = True
    underpayment_tolerance_bps: int = 0
    capture_window_s: int = DEFAULT_CAPTURE_WINDOW_S
    capture_at_window_end: bool = True
    reporting_currency: str | None = None

    @classmethod
    def of(cls, row: OwnerSettings) -> OwnerChoices:
        return cls(
            row.webhook_api_key_header,
            row.underpayment_tolerance_bps,
            row.capture_window_s,
            row.capture_at_window_end,
            row.reporting_currency,
        )


async def get_settings(session: AsyncSession, owner: str) -> OwnerChoices:
    """The owner's choices (defaults when never set)."""
    row = await session.get(OwnerSettings, owner.lower())
    if row is None:
        return OwnerChoices()
    return OwnerChoices.of(row)


async def update_settings(
    session: AsyncSession,
    owner: str,
    webhook_api_key_header: bool | None,
    now_ms: int,
    *,
    underpayment_tolerance_bps: int | None = None,
    capture_window_s: int | None = None,
    capture_at_window_end: bool | None = None,
    reporting_currency: str | None = None,
) -> OwnerChoices:
    """Store the owner's choices (None: unchanged; a reporting currency of "" clears it);
    returns the choices as they now are."""
    if reporting_currency:
        parse_currency(reporting_currency)
    if capture_window_s is not None and not (
        MIN_CAPTURE_WINDOW_S <= capture_window_s <= MAX_CAPTURE_WINDOW_S
    ):
        raise InvalidRequest(
            f"captureWindowS must be {MIN_CAPTURE_WINDOW_S}..{MAX_CAPTURE_WINDOW_S}",
            {"field": "captureWindowS"},
        )
    if underpayment_tolerance_bps is not None and not (
        0 <= underpayment_tolerance_bps <= MAX_TOLERANCE_BPS
    ):
        raise InvalidRequest(
            f"underpaymentToleranceBps must be 0..{MAX_TOLERANCE_BPS}",
            {"field": "underpaymentToleranceBps"},
        )
    owner_key = owner.lower()
    await lock_owner(session, owner_key, now_ms)
    row = await session.get(OwnerSettings, owner_key, populate_existing=True)
    assert row is not None  # locked (so created) just above
    if webhook_api_key_header is not None:
        row.webhook_api_key_header = webhook_api_key_header
    if underpayment_tolerance_bps is not None:
        row.underpayment_tolerance_bps = underpayment_tolerance_bps
    if capture_window_s is not None:
        row.capture_window_s = capture_window_s
    if capture_at_window_end is not None:
        row.capture_at_window_end = capture_at_window_end
    if reporting_currency is not None:
        row.reporting_currency = reporting_currency or None
    row.updated_at = now_ms
    return OwnerChoices.of(row)


def tolerances_of(connection: Connection, owner_keys: Collection[str]) -> dict[str, int]:
    """The underpayment tolerance of each owner that set one (basis points), in one query
    on a Core connection (the create path's batch transaction)."""
    rows = connection.execute(
        select(OwnerSettings.owner_key, OwnerSettings.underpayment_tolerance_bps).where(
            OwnerSettings.owner_key.in_(sorted(owner_keys)),
            OwnerSettings.underpayment_tolerance_bps > 0,
        )
    )
    return {owner_key: int(bps) for owner_key, bps in rows}


async def lock_owner(session: AsyncSession, owner_key: str, now_ms: int) -> None:
    """Create the owner's settings row if missing (defaults), then hold its row lock until
    the transaction ends (SQLite: the write transaction already excludes every other)."""
    dialect = (await session.connection()).dialect.name
    await session.execute(
        upsert(dialect, OwnerSettings)
        .values(owner_key=owner_key, webhook_api_key_header=True, updated_at=now_ms)
        .on_conflict_do_nothing(index_elements=[OwnerSettings.owner_key])
    )
    await session.execute(
        select(OwnerSettings.owner_key)
        .where(OwnerSettings.owner_key == owner_key)
        .with_for_update()
    )
