"""An owner's mail settings: the address and the events mailed there (docs/integration/email.md).

An address is read from a stranger and ends up in an SMTP envelope and a ``To:`` header, so
only a plain ASCII ``local@domain`` is taken (no display name, no quoting, no comments, no
control character: nothing that could add a header or a recipient).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import upsert
from invoicing.errors import InvalidRequest
from invoicing.notifications.mail.texts import LANGUAGE_CODES
from invoicing.tables.mail import OwnerMail

MAX_EMAIL_CHARS = 254
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL = re.compile(rf"[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]{{1,64}}@{_LABEL}(?:\.{_LABEL})+")


@dataclass(frozen=True)
class MailChoices:
    """What an owner has mailed (no address: nothing)."""

    email: str | None
    events: tuple[str, ...]
    language: str
    receipts: bool = False  # payers may ask for a receipt on the payment page


NOTHING = MailChoices(None, (), "en")


def checked_email(text: str) -> str:
    """``text`` when it is a plain ``local@domain`` address; else 400 ``invalid_request``."""
    if len(text) > MAX_EMAIL_CHARS or not EMAIL.fullmatch(text) or ".." in text:
        raise InvalidRequest("email must be a plain address, like name@example.com")
    return text


def checked_events(events: Sequence[str], known: Sequence[str]) -> tuple[str, ...]:
    """The event types, each known, without repeats, in the order given."""
    unknown = [event for event in events if event not in known]
    if unknown:
        raise InvalidRequest("unknown event type", {"unknown": unknown[:10], "known": list(known)})
    return tuple(dict.fromkeys(events))


async def mail_choices(session: AsyncSession, owner_key: str) -> MailChoices:
    row = await session.get(OwnerMail, owner_key)
    if row is None:
        return NOTHING
    return MailChoices(row.email, tuple(row.events), row.language, row.receipts)


async def set_mail_choices(
    session: AsyncSession,
    owner_key: str,
    choices: MailChoices,
    known_events: Sequence[str],
    now_ms: int,
) -> MailChoices:
    """Store the owner's mail settings (checked here, whoever calls)."""
    if choices.email is None:
        raise InvalidRequest("email is required")
    if choices.language not in LANGUAGE_CODES:
        raise InvalidRequest("unsupported language", {"supported": list(LANGUAGE_CODES)})
    stored = MailChoices(
        checked_email(choices.email),
        checked_events(choices.events, known_events),
        choices.language,
        choices.receipts,
    )
    row = {
        "owner_key": owner_key,
        "email": stored.email,
        "events": list(stored.events),
        "language": stored.language,
        "receipts": stored.receipts,
        "updated_at": now_ms,
    }
    dialect = (await session.connection()).dialect.name
    statement = upsert(dialect, OwnerMail).values(row)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=["owner_key"], set_={k: v for k, v in row.items() if k != "owner_key"}
        )
    )
    return stored


async def mailed_owners(session: AsyncSession, owner_keys: Sequence[str]) -> dict[str, OwnerMail]:
    """The mail settings of those of ``owner_keys`` that have any (one query)."""
    if not owner_keys:
        return {}
    rows = await session.scalars(select(OwnerMail).where(OwnerMail.owner_key.in_(owner_keys)))
    return {row.owner_key: row for row in rows if row.events or row.receipts}
