"""API keys: issue one with a label (shown once), see each key's dates, revoke. The same
actions as the API (``actions.keys``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.actions.keys import end_api_key, issue_api_key
from invoicing.auth.api_keys import list_api_keys
from invoicing.errors import ServiceError
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import (
    csrf_input_html,
    e,
    notice_html,
    revocable_cells_html,
    shown_once_html,
    table_html,
    utc_text,
)
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)


async def keys_body_html(request: Request, owner: Owner, top_html: str = "") -> str:
    services = services_of(request)
    async with services.db.sessions() as session:
        rows = await list_api_keys(session, owner.key)
    table = [
        [
            e(row.label or "–"),
            f'<span class="mono">{e(row.id)}</span>',
            e(utc_text(row.created_at)),
            e(utc_text(row.last_used_at) if row.last_used_at else "never"),
            *revocable_cells_html(
                row.revoked_at,
                f"/dashboard/api-keys/{row.id}/revoke",
                owner.csrf,
                f"key {row.label or row.id}",
            ),
        ]
        for row in reversed(rows)
    ]
    return (
        top_html + '<form class="card" method="post" action="/dashboard/api-keys" id="issue-key">'
        f"{csrf_input_html(owner.csrf)}"
        '<div class="field"><label for="key-label">Label</label>'
        '<input id="key-label" name="label" maxlength="200" required></div>'
        '<button type="submit">Issue a key</button>'
        '<p class="muted">The key is shown once, right after it is issued. Keys authenticate '
        "your server's API calls; the dashboard itself never needs one.</p></form>"
        + table_html(
            ["Label", "Id", "Created", "Last used", "State", "Revoked"], table, "API keys", "keys"
        )
    )


@router.get("/api-keys", response_class=HTMLResponse)
async def keys_page(request: Request, owner: SignedIn) -> HTMLResponse:
    notice = notice_html(request.query_params.get("notice"))
    return html("API keys", await keys_body_html(request, owner, notice), owner, "keys")


async def _fail(request: Request, owner: Owner, exc: ServiceError) -> HTMLResponse:
    top = notice_html(exc.message, error=True)
    body = await keys_body_html(request, owner, top)
    return html("API keys", body, owner, "keys", exc.status)


@router.post("/api-keys", response_class=HTMLResponse)
async def issue(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    label = fields.get("label", "").strip()[:200] or None
    try:
        row, key = await issue_api_key(services, owner.address, label)
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    title = f"Your new key {row.label or ''}"
    top = shown_once_html("new-key", title, "copy it now", key.get_secret_value())
    return html("API keys", await keys_body_html(request, owner, top), owner, "keys", 201)


@router.post("/api-keys/{key_id}/revoke")
async def revoke(request: Request, key_id: str, owner: SignedIn) -> Response:
    services = services_of(request)
    try:
        await end_api_key(services, owner.key, key_id[:36])
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return RedirectResponse("/dashboard/api-keys?notice=Key+revoked", status_code=303)
