"""The owner's team (docs/integration/members.md): request signature only, as API keys are.

- ``GET /integration/members`` (``member.list``): the members and their roles.
- ``POST /integration/members`` (``member.add``): ``{"address", "role"}`` adds a member or
  changes a member's role (201 either way).
- ``DELETE /integration/members?address=`` (``member.remove``): 404 if not a member; their
  dashboard sessions on the account end.

Only the owner's wallet manages the team: an API key cannot (an admin member, who may issue
API keys in the dashboard, could otherwise reach the team through one).
"""

from __future__ import annotations

from typing import Self

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.auth.team import add_member, checked_role, list_members, remove_member
from invoicing.errors import Conflict, NotFound
from invoicing.tables.auth import TeamMember
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address, OwnerQuery
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    SIGNATURE_AUTH,
    AddressOut,
    Answer,
    documented,
)

router = APIRouter(prefix="/integration/members", tags=["members"])

RoleName = Field(pattern="^(viewer|operator|admin)$", description="viewer, operator or admin.")


class MemberBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    address: Address
    role: str = RoleName


class MemberQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    address: Address


class Member(WireModel):
    """A wallet that acts on the owner's account in the dashboard, within its role."""

    address: AddressOut
    role: str = Field(description="viewer, operator or admin.")
    createdAt: int
    updatedAt: int

    @classmethod
    def of(cls, row: TeamMember) -> Self:
        return cls(
            address=row.member_address,
            role=row.role,
            createdAt=row.created_at,
            updatedAt=row.updated_at,
        )


class MemberList(WireModel):
    items: list[Member]


class RemovedMember(WireModel):
    removed: bool
    address: AddressOut


@router.get(
    "",
    **documented(
        "List the owner's team (request signature only)",
        sdk="members.list",
        ok=MemberList,
        query=OwnerQuery,
        errors=OWNER_ROUTE_ERRORS,
        auth=SIGNATURE_AUTH,
        action="member.list",
    ),
)
async def list_(request: Request) -> Answer[MemberList]:
    services = services_of(request)
    _query, caller = await authorized_query(request, "member.list", OwnerQuery, allow_api_key=False)
    async with services.db.sessions() as session:
        rows = await list_members(session, caller.owner_key)
    return Answer(MemberList(items=[Member.of(row) for row in rows]))


@router.post(
    "",
    **documented(
        "Add a member, or change a member's role (request signature only)",
        sdk="members.add",
        ok=Member,
        status=201,
        body=MemberBody,
        errors=(*BODY_ROUTE_ERRORS, Conflict),
        auth=SIGNATURE_AUTH,
        action="member.add",
    ),
)
async def add(request: Request) -> Answer[Member]:
    services = services_of(request)
    body, caller = await authorized_body(request, "member.add", MemberBody, allow_api_key=False)
    role = checked_role(body.role)
    async with services.db.transaction() as session:
        row = await add_member(
            session, caller.owner_key, body.address, role, services.clock.now_ms()
        )
    return Answer(Member.of(row), status_code=201)


@router.delete(
    "",
    **documented(
        "Remove a member (request signature only)",
        sdk="members.remove",
        ok=RemovedMember,
        query=MemberQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        auth=SIGNATURE_AUTH,
        action="member.remove",
    ),
)
async def remove(request: Request) -> Answer[RemovedMember]:
    services = services_of(request)
    query, caller = await authorized_query(
        request, "member.remove", MemberQuery, allow_api_key=False
    )
    async with services.db.transaction() as session:
        await remove_member(session, caller.owner_key, query.address, services.clock.now_ms())
    return Answer(RemovedMember(removed=True, address=query.address))
