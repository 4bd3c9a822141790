"""Brand: the display name, accent colour and logo the payment page shows, changed with the
API's own calls (``brand.service``'s ``check_brand_update`` and ``update_brand``: the same
checks, errors and storage as ``PUT /integration/settings/brand``). Like webhooks and API
keys it is a setting of the service, not of the chain, so the session (and its CSRF token)
is enough: no wallet signature.

The form is urlencoded like every dashboard form; the dashboard's script puts the chosen file
into the hidden ``logo`` field as base64 (the API's ``logo``), so the form may be larger than
other forms (``BRAND_FORM_MAX_BYTES``). Empty name or colour removes it; a file left unchosen
keeps the logo, and its own button removes it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.brand.colors import WHITE, contrast
from invoicing.brand.logo import MAX_LOGO_BYTES
from invoicing.brand.service import (
    MAX_DISPLAY_NAME_CHARS,
    UNSET,
    Brand,
    check_brand_update,
    get_brand,
    update_brand,
)
from invoicing.errors import ServiceError
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.render import dashboard_html
from invoicing.web.dashboard.session import (
    Owner,
    SignedIn,
    form_fields,
    signed_in_with_form_up_to,
)
from invoicing.web.page.render import logo_path

router = APIRouter(prefix="/dashboard", include_in_schema=False)

# The script reads a file of up to this many bytes (a larger one is refused in the browser,
# with the service's own message); the server refuses anything over MAX_LOGO_BYTES.
MAX_FILE_BYTES_SENT = 4 * MAX_LOGO_BYTES
# Its base64, percent-encoded in the form (at most twice as long), and the other fields.
BRAND_FORM_MAX_BYTES = 2 * (MAX_FILE_BYTES_SENT * 4 // 3) + 16 * 1024
LOGO_TOO_LARGE = f"logo must be at most {MAX_LOGO_BYTES // 1024} KiB"
LOGO_TYPES = "image/png,image/jpeg,image/webp"
SignedInWithLogo = Annotated[Owner, Depends(signed_in_with_form_up_to(BRAND_FORM_MAX_BYTES))]
# Each field of the form, by the name the API's errors give in ``details.field``.
FIELD_IDS = {"displayName": "brand-name", "accentColor": "brand-accent", "logo": "brand-logo"}


def preview(brand: Brand) -> dict[str, str] | None:
    """The accent and its text colour as the payment page shows them (None: the page's own
    colours), for ``dashboard/brand_parts.html``."""
    if brand.accent_color is None or brand.text_color is None:
        return None
    name = brand.display_name or "Pay"
    return {
        "accent": brand.accent_color,
        "text": brand.text_color,
        "which": "white" if brand.text_color == WHITE else "black",
        "label": name if len(name) <= 20 else name[:19] + "…",
        "ratio": f"{contrast(brand.accent_color, brand.text_color):.1f}",
    }


def preview_html(brand: Brand) -> str:
    return dashboard_html("brand_preview.html", preview=preview(brand))


def brand_form(values: dict[str, str], error: ServiceError | None = None) -> dict[str, object]:
    """What the form shows: the values typed (or stored), and the field the service refused
    with its message."""
    accent = values.get("accentColor", "")
    refused = None if error is None else FIELD_IDS.get((error.details or {}).get("field", ""))
    return {
        "ids": FIELD_IDS,
        "name": values.get("displayName", ""),
        "accent": accent,
        "picker": accent if len(accent) == 7 and accent.startswith("#") else "#1a6b3c",
        "refused": refused,
        "error": None if error is None else error.message,
        "max_file_bytes": MAX_FILE_BYTES_SENT,
        "too_large": LOGO_TOO_LARGE,
        "max_name_chars": MAX_DISPLAY_NAME_CHARS,
        "max_logo_kib": MAX_LOGO_BYTES // 1024,
        "logo_types": LOGO_TYPES,
    }


def brand_form_html(owner: Owner, values: dict[str, str], error: ServiceError | None = None) -> str:
    return dashboard_html("brand_form.html", csrf=owner.csrf, form=brand_form(values, error))


async def _brand_page(
    request: Request,
    owner: Owner,
    status_code: int = 200,
    values: dict[str, str] | None = None,
    refusal: ServiceError | None = None,
    **top: str | None,
) -> HTMLResponse:
    """The page: the brand now, and the form (``values`` typed, the ``refusal`` of them);
    ``top``: a ``notice`` or an ``error`` above it."""
    services = services_of(request)
    async with services.db.sessions() as session:
        brand = await get_brand(session, owner.key)
    if values is None:
        values = {"displayName": brand.display_name or "", "accentColor": brand.accent_color or ""}
    return html_page(
        "brand.html",
        "Brand",
        owner,
        "brand",
        status_code,
        brand=brand,
        preview=preview(brand),
        logo_url=None if brand.logo_sha256 is None else logo_path(brand.logo_sha256),
        form=brand_form(values, refusal),
        **({"notice": None, "error": None} | top),
    )


@router.get("/brand", response_class=HTMLResponse)
async def brand_page(request: Request, owner: SignedIn) -> HTMLResponse:
    return await _brand_page(request, owner, notice=request.query_params.get("notice"))


def _given(fields: dict[str, str], name: str) -> str | None | object:
    """A text field: left out of the form, unchanged; empty, removed; else the text."""
    if name not in fields:
        return UNSET
    return fields[name].strip() or None


@router.post("/brand", response_class=HTMLResponse)
async def save_brand(request: Request, owner: SignedInWithLogo) -> Response:
    services = services_of(request)
    fields = await form_fields(request, BRAND_FORM_MAX_BYTES)
    logo = fields.get("logo", "").strip()
    try:
        update = await check_brand_update(
            display_name=_given(fields, "displayName"),
            accent_color=_given(fields, "accentColor"),
            logo=logo or UNSET,
        )
        async with services.db.transaction() as session:
            await update_brand(session, owner.key, services.clock.now_ms(), update)
    except ServiceError as exc:
        shown = {name: fields.get(name, "")[:256] for name in ("displayName", "accentColor")}
        error = f"Nothing was saved: {exc.message} ({exc.code})"
        return await _brand_page(request, owner, exc.status, shown, exc, error=error)
    return RedirectResponse("/dashboard/brand?notice=Brand+saved", status_code=303)


@router.post("/brand/remove-logo")
async def remove_logo(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    update = await check_brand_update(logo=None)
    async with services.db.transaction() as session:
        await update_brand(session, owner.key, services.clock.now_ms(), update)
    return RedirectResponse("/dashboard/brand?notice=Logo+removed", status_code=303)
