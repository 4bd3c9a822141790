"""An owner's team: other wallets that sign in to the dashboard and act on the owner's
account within a role (docs/security.md#members).

| role | may |
|---|---|
| ``viewer`` | read every page (not the team) |
| ``operator`` | what a viewer may, and create and cancel invoices, and manage webhooks |
| ``admin`` | what an API key may: everything but the team and the owner's sessions |

Only the owner manages the team: with the wallet's request signature on the API, or in their
own dashboard session. Money actions (refunds, fee, payout) stay EIP-712 messages the
owner's wallet signs, whoever prepares them. A member's role is read at every request, so
removing a member or changing a role takes effect at their next click.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database, upsert
from invoicing.errors import Conflict, InvalidRequest, NotFound
from invoicing.tables.auth import DashboardSession, TeamMember

MAX_MEMBERS = 50


class Role(enum.StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Ability(enum.Enum):
    """What a request does, as the roles are written."""

    READ = "read"
    INVOICES = "invoices"  # create and cancel
    WEBHOOKS = "webhooks"  # endpoints, secrets, redeliveries
    SETTINGS = "settings"  # API keys, brand, email, the paid webhook's header, prepares
    OWNER = "owner"  # the team, the owner's sessions


ABILITIES: dict[Role, frozenset[Ability]] = {
    Role.VIEWER: frozenset({Ability.READ}),
    Role.OPERATOR: frozenset({Ability.READ, Ability.INVOICES, Ability.WEBHOOKS}),
    Role.ADMIN: frozenset({Ability.READ, Ability.INVOICES, Ability.WEBHOOKS, Ability.SETTINGS}),
}


def may(role: Role | None, ability: Ability) -> bool:
    """Whether ``role`` (None: the owner) may do ``ability``."""
    return role is None or ability in ABILITIES[role]


def checked_role(text: str) -> Role:
    try:
        return Role(text)
    except ValueError:
        raise InvalidRequest(
            "role must be viewer, operator or admin", {"roles": [r.value for r in Role]}
        ) from None


async def add_member(
    session: AsyncSession, owner_key: str, member_address: str, role: Role, now_ms: int
) -> TeamMember:
    """Add a member, or change a member's role (an owner cannot be their own member)."""
    member_key = member_address.lower()
    if member_key == owner_key:
        raise InvalidRequest("the owner is not a member of their own team")
    held = await list_members(session, owner_key)
    if len(held) >= MAX_MEMBERS and member_key not in {m.member_key for m in held}:
        raise Conflict(f"a team has at most {MAX_MEMBERS} members")
    row = {
        "owner_key": owner_key,
        "member_key": member_key,
        "member_address": member_address,
        "role": role.value,
        "created_at": now_ms,
        "updated_at": now_ms,
    }
    dialect = (await session.connection()).dialect.name
    await session.execute(
        upsert(dialect, TeamMember)
        .values(row)
        .on_conflict_do_update(
            index_elements=["owner_key", "member_key"],
            set_={"role": role.value, "updated_at": now_ms},
        )
    )
    found = await session.get(TeamMember, (owner_key, member_key), populate_existing=True)
    assert found is not None  # written just above
    return found


async def list_members(session: AsyncSession, owner_key: str) -> Sequence[TeamMember]:
    rows = await session.scalars(
        select(TeamMember)
        .where(TeamMember.owner_key == owner_key)
        .order_by(TeamMember.created_at, TeamMember.member_key)
    )
    return rows.all()


async def remove_member(
    session: AsyncSession, owner_key: str, member_address: str, now_ms: int
) -> None:
    """Remove a member (404 if not one) and end their sessions on the account."""
    member_key = member_address.lower()
    gone = await session.execute(
        delete(TeamMember).where(
            TeamMember.owner_key == owner_key, TeamMember.member_key == member_key
        )
    )
    if gone.rowcount != 1:  # type: ignore[attr-defined]
        raise NotFound("no such member of this team")
    await session.execute(
        update(DashboardSession)
        .where(
            DashboardSession.owner_key == owner_key,
            DashboardSession.member_key == member_key,
            DashboardSession.revoked_at.is_(None),
        )
        .values(revoked_at=now_ms)
    )


async def member_role(db: Database, owner_key: str, member_key: str) -> Role | None:
    """The member's current role on the account, or None when no longer a member."""
    async with db.reads() as session:
        role = await session.scalar(
            select(TeamMember.role).where(
                TeamMember.owner_key == owner_key, TeamMember.member_key == member_key
            )
        )
    return None if role is None else Role(role)
