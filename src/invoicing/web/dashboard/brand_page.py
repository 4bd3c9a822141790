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
from invoicing.web.dashboard.common import html
from invoicing.web.dashboard.render import attrs, csrf_input_html, e, facts_html, notice_html
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


def preview_html(brand: Brand) -> str:
    """The accent with its text colour, as the payment page's band and button show them (an
    inline SVG: the dashboard's CSP allows no inline style)."""
    if brand.accent_color is None or brand.text_color is None:
        return '<span id="accent-preview" class="muted">The payment page\'s own colours</span>'
    accent, text = brand.accent_color, brand.text_color
    ratio = contrast(accent, text)
    name = brand.display_name or "Pay"
    label = name if len(name) <= 20 else name[:19] + "…"
    which = "white" if text == WHITE else "black"
    return (
        f'<span id="accent-preview" class="swatch"><svg role="img" viewBox="0 0 240 44" '
        f'width="240" height="44" aria-label="{e(which)} text on {e(accent)}">'
        f'<rect width="240" height="44" rx="8" fill="{e(accent)}"/>'
        f'<text x="16" y="28" font-size="16" font-weight="700" fill="{e(text)}">{e(label)}'
        f"</text></svg> {e(accent)}, text {e(which)} ({ratio:.1f}:1)</span>"
    )


def _current_html(brand: Brand, owner: Owner) -> str:
    logo = '<span class="muted">none</span>'
    if brand.logo_sha256 is not None:
        logo = (
            f'<img id="brand-current-logo" class="logo" src="{e(logo_path(brand.logo_sha256))}" '
            'alt="Your current logo">'
            '<form method="post" action="/dashboard/brand/remove-logo" id="remove-logo">'
            f"{csrf_input_html(owner.csrf)}"
            '<button type="submit" class="danger">Remove the logo</button></form>'
        )
    name = brand.display_name
    return (
        '<section class="card" id="brand-current">'
        + facts_html(
            [
                ("Display name", e(name) if name else '<span class="muted">none</span>'),
                ("Accent colour", preview_html(brand)),
                ("Logo", logo),
            ]
        )
        + "</section>"
    )


def _field_html(field: str, label: str, hint: str, control: str, error: ServiceError | None) -> str:
    """A labelled control with its hint, and the error when the service refused this field."""
    field_id = FIELD_IDS[field]
    message = ""
    if error is not None and (error.details or {}).get("field") == field:
        message = f'<p class="field-error" id="{field_id}-error">{e(error.message)}</p>'
    return (
        f'<div class="field"><label for="{field_id}">{e(label)}</label>'
        f'<p class="hint" id="{field_id}-hint">{hint}</p>{control}{message}</div>'
    )


def _control_attrs(field: str, error: ServiceError | None) -> str:
    field_id = FIELD_IDS[field]
    invalid = error is not None and (error.details or {}).get("field") == field
    described = f"{field_id}-hint" + (f" {field_id}-error" if invalid else "")
    return attrs(id=field_id, aria_describedby=described, aria_invalid="true" if invalid else None)


def brand_form_html(owner: Owner, values: dict[str, str], error: ServiceError | None = None) -> str:
    accent = values.get("accentColor", "")
    picker = accent if len(accent) == 7 and accent.startswith("#") else "#1a6b3c"
    return (
        '<form class="card" method="post" action="/dashboard/brand" id="brand-form" '
        f'data-logo-form data-max-file-bytes="{MAX_FILE_BYTES_SENT}" '
        f'data-too-large="{e(LOGO_TOO_LARGE)}">{csrf_input_html(owner.csrf)}'
        + _field_html(
            "displayName",
            "Display name",
            f"Shown above the invoice, 1 to {MAX_DISPLAY_NAME_CHARS} characters. Empty: none.",
            f'<input name="displayName" size="40"{_control_attrs("displayName", error)}'
            f"{attrs(value=values.get('displayName', ''))}>",
            error,
        )
        + _field_html(
            "accentColor",
            "Accent colour",
            "<code>#rrggbb</code>, like <code>#1a6b3c</code>: the page's band and buttons. "
            "Text on it is black or white, whichever contrasts more. Empty: the page's own.",
            '<span class="color-pair">'
            f'<input name="accentColor" size="10" autocomplete="off"'
            f"{_control_attrs('accentColor', error)}{attrs(value=accent)}>"
            f'<input type="color" id="brand-accent-picker" data-color-for="brand-accent" '
            f'aria-label="Pick the accent colour" value="{e(picker)}"></span>',
            error,
        )
        + _field_html(
            "logo",
            "New logo",
            f"A PNG, JPEG or WebP file of at most {MAX_LOGO_BYTES // 1024} KiB (no SVG or GIF); "
            "the service stores its own PNG of it. None chosen: the logo stays.",
            f'<input type="file" accept="{LOGO_TYPES}"{_control_attrs("logo", error)}>'
            '<input type="hidden" name="logo" value="" data-logo-data>',
            error,
        )
        + '<button type="submit">Save the brand</button>'
        '<p data-status role="status" aria-live="polite"></p></form>'
    )


async def brand_body_html(
    request: Request,
    owner: Owner,
    top_html: str = "",
    values: dict[str, str] | None = None,
    error: ServiceError | None = None,
) -> str:
    services = services_of(request)
    async with services.db.sessions() as session:
        brand = await get_brand(session, owner.key)
    if values is None:
        values = {"displayName": brand.display_name or "", "accentColor": brand.accent_color or ""}
    return (
        top_html
        + "<p>What your payment pages show: your name, your logo and your colour. The same "
        "setting as the API's <code>PUT /integration/settings/brand</code>; it needs no wallet "
        "signature.</p>"
        + "<h2>Now</h2>"
        + _current_html(brand, owner)
        + "<h2>Change</h2>"
        + brand_form_html(owner, values, error)
    )


@router.get("/brand", response_class=HTMLResponse)
async def brand_page(request: Request, owner: SignedIn) -> HTMLResponse:
    top = notice_html(request.query_params.get("notice"))
    return html("Brand", await brand_body_html(request, owner, top), owner, "brand")


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
        top = notice_html(f"Nothing was saved: {exc.message} ({exc.code})", error=True)
        shown = {name: fields.get(name, "")[:256] for name in ("displayName", "accentColor")}
        body = await brand_body_html(request, owner, top, shown, exc)
        return html("Brand", body, owner, "brand", exc.status)
    return RedirectResponse("/dashboard/brand?notice=Brand+saved", status_code=303)


@router.post("/brand/remove-logo")
async def remove_logo(request: Request, owner: SignedIn) -> Response:
    services = services_of(request)
    update = await check_brand_update(logo=None)
    async with services.db.transaction() as session:
        await update_brand(session, owner.key, services.clock.now_ms(), update)
    return RedirectResponse("/dashboard/brand?notice=Logo+removed", status_code=303)
