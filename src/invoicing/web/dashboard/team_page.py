"""Team: the wallets that act on the owner's account, with their roles (``auth.team``).
Only the owner's own session reaches this page (``roles``: members are refused)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.addresses import normalize_address
from invoicing.auth.team import Role, add_member, checked_role, list_members, remove_member
from invoicing.errors import InvalidRequest, ServiceError
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.render import utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)


async def _team_page(
    request: Request, owner: Owner, status_code: int = 200, **top: str | None
) -> HTMLResponse:
    """The page; ``top``: a ``notice`` or an ``error`` above it."""
    services = services_of(request)
    async with services.db.sessions() as session:
        members = await list_members(session, owner.key)
    rows = [
        {"address": m.member_address, "role": m.role, "added": utc_text(m.created_at)}
        for m in members
    ]
    return html_page(
        "team.html",
        "Team",
        owner,
        "team",
        status_code,
        members=rows,
        roles=[role.value for role in Role],
        **({"notice": None, "error": None} | top),
    )


@router.get("/team", response_class=HTMLResponse)
async def team_page(request: Request, owner: SignedIn) -> HTMLResponse:
    return await _team_page(request, owner, notice=request.query_params.get("notice"))


@router.post("/team")
async def add(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    try:
        try:
            address = normalize_address(fields.get("address", ""))
        except ValueError as exc:
            raise InvalidRequest(f"address: {exc}") from None
        role = checked_role(fields.get("role", ""))
        async with services.db.transaction() as session:
            await add_member(session, owner.key, address, role, services.clock.now_ms())
    except ServiceError as exc:
        return await _team_page(request, owner, exc.status, error=f"{exc.message} ({exc.code})")
    return RedirectResponse("/dashboard/team?notice=Saved", status_code=303)


@router.post("/team/{member}/remove")
async def remove(request: Request, member: str, owner: SignedIn) -> Response:
    services = services_of(request)
    async with services.db.transaction() as session:
        await remove_member(session, owner.key, member[:42], services.clock.now_ms())
    return RedirectResponse("/dashboard/team?notice=Removed", status_code=303)
