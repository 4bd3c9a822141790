"""Reading and changing an owner's brand (docs/integration/payment-page.md#brand).

An update names only what changes: a field given replaces the stored one, ``null`` removes
it, a field left out stays. ``check_brand_update`` checks everything, decoding the logo in a
child process (``brand.logo_process``), before the caller opens the transaction that
``update_brand`` writes in: a refused update (400 ``invalid_request``, ``details.field``)
changes nothing, and a slow decode holds no connection or lock of the database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.brand.colors import ColorProblem, parse_color, text_color_on
from invoicing.brand.logo import LogoProblem, screen_logo
from invoicing.brand.logo_process import DecodersBusy, reencoded_in_child
from invoicing.db import Database, upsert
from invoicing.errors import InvalidRequest, RateLimited
from invoicing.tables.brand import OwnerBrand

MAX_DISPLAY_NAME_CHARS = 64
UNSET = object()  # a field the update leaves as it is


@dataclass(frozen=True)
class Brand:
    """What the payment page shows of an owner (every part optional)."""

    display_name: str | None = None
    accent_color: str | None = None
    text_color: str | None = None
    logo_sha256: str | None = None


def parse_display_name(text: str) -> str:
    """The name as shown: trimmed, 1 to 64 characters, no control or format characters."""
    name = text.strip()
    if not 1 <= len(name) <= MAX_DISPLAY_NAME_CHARS:
        raise InvalidRequest(
            f"displayName must be 1 to {MAX_DISPLAY_NAME_CHARS} characters",
            {"field": "displayName"},
        )
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") for ch in name):
        raise InvalidRequest(
            "displayName must not contain control or invisible characters",
            {"field": "displayName"},
        )
    return name


async def decode_logo(text: str) -> bytes:
    """The logo field (base64 of the image file) as a re-encoded PNG: 400 ``invalid_request``
    (``details.reason``: ``logo.REASONS``) when refused, 429 ``rate_limited`` while this
    process decodes as many logos as it may at once."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        details = {"field": "logo", "reason": "not_base64"}
        raise InvalidRequest("logo must be base64", details) from None
    try:
        screen_logo(data)
        return await reencoded_in_child(data)
    except LogoProblem as problem:
        details = {"field": "logo", "reason": problem.reason}
        raise InvalidRequest(f"logo {problem}", details) from None
    except DecodersBusy:
        raise RateLimited("too many logos are being decoded; retry in a second", 1) from None


def _brand(row: OwnerBrand | None) -> Brand:
    if row is None:
        return Brand()
    return Brand(row.display_name, row.accent_color, row.text_color, row.logo_sha256)


async def get_brand(session: AsyncSession, owner: str) -> Brand:
    return _brand(await session.get(OwnerBrand, owner.lower()))


@dataclass(frozen=True)
class BrandUpdate:
    """A checked update: the columns it sets, with their new values."""

    changes: Mapping[str, object]


async def check_brand_update(
    *,
    display_name: str | None | object = UNSET,
    accent_color: str | None | object = UNSET,
    logo: str | None | object = UNSET,
) -> BrandUpdate:
    """Check every given field (the logo decoded); call it before opening a transaction."""
    changes: dict[str, object] = {}
    if display_name is not UNSET:
        changes["display_name"] = (
            None if display_name is None else parse_display_name(str(display_name))
        )
    if accent_color is not UNSET:
        if accent_color is None:
            changes.update(accent_color=None, text_color=None)
        else:
            try:
                accent = parse_color(str(accent_color))
                changes.update(accent_color=accent, text_color=text_color_on(accent))
            except ColorProblem as problem:
                raise InvalidRequest(f"accentColor {problem}", {"field": "accentColor"}) from None
    if logo is not UNSET:
        png = None if logo is None else await decode_logo(str(logo))
        changes.update(
            logo_png=png, logo_sha256=None if png is None else hashlib.sha256(png).hexdigest()
        )
    return BrandUpdate(changes)


async def update_brand(
    session: AsyncSession, owner: str, now_ms: int, update: BrandUpdate
) -> Brand:
    """Store a checked update; returns the brand as it now is."""
    owner_key = owner.lower()
    # Create the row if missing (two first updates at once: one inserts, neither fails),
    # then hold its lock until the transaction ends.
    dialect = (await session.connection()).dialect.name
    await session.execute(
        upsert(dialect, OwnerBrand)
        .values(owner_key=owner_key, updated_at=now_ms)
        .on_conflict_do_nothing(index_elements=[OwnerBrand.owner_key])
    )
    row = await session.get(OwnerBrand, owner_key, with_for_update=True, populate_existing=True)
    assert row is not None  # inserted just above, or before
    for name, value in update.changes.items():
        setattr(row, name, value)
    row.updated_at = now_ms
    await session.flush()
    return _brand(row)


async def brand_of(db: Database, owner_key: str) -> Brand:
    """The owner's brand for the payment page (no brand: every part None)."""
    async with db.sessions() as session:
        return _brand(await session.get(OwnerBrand, owner_key))


async def logo_png(db: Database, sha256: str) -> bytes | None:
    """The stored logo whose sha256 this is, or None."""
    async with db.sessions() as session:
        found = await session.scalar(
            select(OwnerBrand.logo_png).where(OwnerBrand.logo_sha256 == sha256).limit(1)
        )
    return found
