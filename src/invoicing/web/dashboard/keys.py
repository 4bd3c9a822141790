"""API keys: issue one with a label (shown once), see each key's dates, revoke. The same
actions as the API (``actions.keys``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.actions.keys import end_api_key, issue_api_key
from invoicing.auth.api_keys import list_api_keys
from invoicing.errors import ServiceError
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.render import utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)


async def _keys_page(
    request: Request, owner: Owner, status_code: int = 200, **top: object
) -> HTMLResponse:
    """The page; ``top``: what shows above the form (``notice``, ``error`` or the
    ``fresh`` key, shown once)."""
    services = services_of(request)
    async with services.db.sessions() as session:
        rows = await list_api_keys(session, owner.key)
    keys = [
        {
            "label": row.label or "–",
            "id": row.id,
            "created": utc_text(row.created_at),
            "last_used": utc_text(row.last_used_at) if row.last_used_at else "never",
            "revoked": utc_text(row.revoked_at) if row.revoked_at else None,
            "revoke_action": f"/dashboard/api-keys/{row.id}/revoke",
            "name": f"key {row.label or row.id}",
        }
        for row in reversed(rows)
    ]
    values = {"notice": None, "error": None, "fresh": None} | top
    return html_page("keys.html", "API keys", owner, "keys", status_code, keys=keys, **values)


@router.get("/api-keys", response_class=HTMLResponse)
async def keys_page(request: Request, owner: SignedIn) -> HTMLResponse:
    return await _keys_page(request, owner, notice=request.query_params.get("notice"))


async def _fail(request: Request, owner: Owner, exc: ServiceError) -> HTMLResponse:
    return await _keys_page(request, owner, exc.status, error=exc.message)


@router.post("/api-keys", response_class=HTMLResponse)
async def issue(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    label = fields.get("label", "").strip()[:200] or None
    try:
        row, key = await issue_api_key(services, owner.address, label)
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    fresh = {
        "box_id": "new-key",
        "title": f"Your new key {row.label or ''}",
        "advice": "copy it now",
        "secret": key.get_secret_value(),
    }
    return await _keys_page(request, owner, 201, fresh=fresh)


@router.post("/api-keys/{key_id}/revoke")
async def revoke(request: Request, key_id: str, owner: SignedIn) -> Response:
    services = services_of(request)
    try:
        await end_api_key(services, owner.key, key_id[:36])
    except ServiceError as exc:
        return await _fail(request, owner, exc)
    return RedirectResponse("/dashboard/api-keys?notice=Key+revoked", status_code=303)
