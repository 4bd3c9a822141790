"""Team: the wallets that act on the owner's account, with their roles (``auth.team``).
Only the owner's own session reaches this page (``roles``: members are refused)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.addresses import normalize_address
from invoicing.auth.team import Role, add_member, checked_role, list_members, remove_member
from invoicing.errors import InvalidRequest, ServiceError
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import csrf_input_html, e, notice_html, table_html, utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)

ROLES_HTML = (
    "<p><strong>viewer</strong>: reads every page. <strong>operator</strong>: also creates "
    "and cancels invoices and manages webhooks. <strong>admin</strong>: everything an API "
    "key can do (API keys, brand, email, settings), but not the team. Refunds, the fee and "
    "the payout still need your wallet's signature. Members sign in with their own wallet, "
    "naming your address as the account.</p>"
)


async def team_html(request: Request, owner: Owner, top_html: str = "") -> str:
    services = services_of(request)
    async with services.db.sessions() as session:
        members = await list_members(session, owner.key)
    rows = [
        [
            f'<span class="mono">{e(m.member_address)}</span>',
            e(m.role),
            e(utc_text(m.created_at)),
            f'<form method="post" action="/dashboard/team/{e(m.member_address)}/remove">'
            f'{csrf_input_html(owner.csrf)}<button type="submit" class="danger" '
            f'aria-label="Remove {e(m.member_address)}">Remove</button></form>',
        ]
        for m in members
    ]
    options = "".join(f'<option value="{r.value}">{r.value}</option>' for r in Role)
    return (
        top_html
        + "<h2>Team</h2>"
        + ROLES_HTML
        + table_html(["Wallet", "Role", "Added", "Remove"], rows, "Team members", "members")
        + '<form class="card" method="post" action="/dashboard/team" id="member-form">'
        f"{csrf_input_html(owner.csrf)}"
        '<div class="field"><label for="member-address">Wallet address</label>'
        '<input id="member-address" name="address" required size="44"></div>'
        '<div class="field"><label for="member-role">Role</label>'
        f'<select id="member-role" name="role">{options}</select></div>'
        '<button type="submit">Add or change the role</button></form>'
    )


@router.get("/team", response_class=HTMLResponse)
async def team_page(request: Request, owner: SignedIn) -> HTMLResponse:
    top = notice_html(request.query_params.get("notice"))
    return html("Team", await team_html(request, owner, top), owner, "team")


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
        top = notice_html(f"{exc.message} ({exc.code})", error=True)
        body = await team_html(request, owner, top)
        return html("Team", body, owner, "team", status_code=exc.status)
    return RedirectResponse("/dashboard/team?notice=Saved", status_code=303)


@router.post("/team/{member}/remove")
async def remove(request: Request, member: str, owner: SignedIn) -> Response:
    services = services_of(request)
    async with services.db.transaction() as session:
        await remove_member(session, owner.key, member[:42], services.clock.now_ms())
    return RedirectResponse("/dashboard/team?notice=Removed", status_code=303)
