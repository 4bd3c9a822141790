"""Creating an invoice or payment link: amount (in the token, or in a currency), token,
description, expiry, the links back to the shop; the answer shows
the hosted page's URL and its QR code. It goes through the API's create
(``invoices.create.create_invoice``, the API's rules and daily limit); the invoice records
that the dashboard made it (no API key rides on its paid webhook)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from invoicing.addresses import normalize_address
from invoicing.auth.guard import Caller
from invoicing.errors import InvalidRequest, ServiceError
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.invoices.views import payment_url
from invoicing.ratelimit import DAY_MS, hit_deferred
from invoicing.services import Services
from invoicing.web.api.invoices import create_rules
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page, symbol
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)

DASHBOARD_MODE = "dashboard"
MAX_EXPIRY_MINUTES = 60 * 24 * 90
# Suggestions for the currency field (any ISO 4217 code is accepted).
CURRENCY_SUGGESTIONS = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD")


def _token_choices(services: Services) -> list[tuple[str, str]]:
    """Each chain's native coin and tokens: (``<chainId>:<token or native>``, its name)."""
    options = []
    for chain in services.chains.all():
        config = chain.config
        values = [(f"{config.chain_id}:native", f"{symbol(services, config.chain_id, None)}")]
        values += [(f"{config.chain_id}:{t.address}", t.symbol) for t in config.tokens]
        options += [(v, f"{label} on {config.name}") for v, label in values]
    return options


def _create_page(
    services: Services,
    owner: Owner,
    values: dict[str, str],
    status_code: int = 200,
    **top: object,
) -> HTMLResponse:
    """The form (filled with ``values``); ``top``: an ``error``, or the invoice ``created``."""
    return html_page(
        "create.html",
        "Create an invoice",
        owner,
        "create",
        status_code,
        values=values,
        assets_offered=_token_choices(services),
        currencies=CURRENCY_SUGGESTIONS,
        max_expiry_minutes=MAX_EXPIRY_MINUTES,
        **({"error": None, "created": None} | top),
    )


def _new_invoice(owner: Owner, fields: dict[str, str], now_ms: int) -> NewInvoice:
    chain_text, _, token_text = fields.get("asset", "").partition(":")
    if not (chain_text.isascii() and chain_text.isdigit() and len(chain_text) < 19):
        raise InvalidRequest("choose a token", {"field": "asset"})
    token = None
    if token_text != "native":
        try:
            token = normalize_address(token_text)
        except ValueError:
            raise InvalidRequest("choose a token", {"field": "asset"}) from None
    expires_at = None
    minutes = fields.get("expiresInMinutes", "").strip()
    if minutes:
        if (
            not (minutes.isascii() and minutes.isdigit())
            or not 0 < int(minutes) <= MAX_EXPIRY_MINUTES
        ):
            raise InvalidRequest("expiry: a number of minutes", {"field": "expiresInMinutes"})
        expires_at = now_ms + int(minutes) * 60_000
    return NewInvoice(
        owner_address=owner.address,
        chain_id=int(chain_text),
        amount=fields.get("amount", "").strip(),
        invoice_id=fields.get("invoiceId", "").strip()[:128] or None,
        token_address=token,
        description=fields.get("description", "").strip()[:1000] or None,
        expires_at=expires_at,
        currency=fields.get("currency", "").strip().upper() or None,
        redirect_url=fields.get("redirectUrl", "").strip() or None,
        cancel_url=fields.get("cancelUrl", "").strip() or None,
    )


@router.get("/invoices/new", response_class=HTMLResponse)
async def create_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    return _create_page(services, owner, {})


@router.post("/invoices/new", response_class=HTMLResponse)
async def create(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    settings = services.settings
    fields = await form_fields(request, settings.max_body_bytes)
    now_ms = services.clock.now_ms()
    try:
        new = _new_invoice(owner, fields, now_ms)
        await hit_deferred(
            services.db,
            [f"invoice-create-owner:{owner.key}"],
            settings.invoice_creation_per_owner_per_day,
            now_ms,
            window_ms=DAY_MS,
        )
        invoice, _created = await create_invoice(
            services.db,
            services.chains.get(new.chain_id),
            new,
            Caller(owner_key=owner.key, mode=DASHBOARD_MODE),
            now_ms,
            settings.default_expiry_s,
            create_rules(settings),
        )
    except ServiceError as exc:
        return _create_page(services, owner, fields, exc.status, error=exc.message)
    created = {
        "id": invoice.id,
        "invoice_id": invoice.invoice_id,
        "payment_address": invoice.payment_address,
        "url": payment_url(settings.payment_page_url, invoice.payment_address),
    }
    return _create_page(services, owner, {}, 201, created=created)
