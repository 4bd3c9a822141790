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
from invoicing.web.dashboard.common import html, symbol
from invoicing.web.dashboard.render import attrs, csrf_input_html, e, notice_html
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields

router = APIRouter(prefix="/dashboard", include_in_schema=False)

DASHBOARD_MODE = "dashboard"
MAX_EXPIRY_MINUTES = 60 * 24 * 90
# Suggestions for the currency field (any ISO 4217 code is accepted).
CURRENCY_OPTIONS = "".join(
    f'<option value="{code}"></option>' for code in ("USD", "EUR", "GBP", "JPY", "CHF", "CAD")
)


def _token_choices(services: Services, chosen: str) -> str:
    options = []
    for chain in services.chains.all():
        config = chain.config
        values = [(f"{config.chain_id}:native", f"{symbol(services, config.chain_id, None)}")]
        values += [(f"{config.chain_id}:{t.address}", t.symbol) for t in config.tokens]
        options += [
            f'<option value="{e(v)}"{" selected" if v == chosen else ""}>'
            f"{e(label)} on {e(config.name)}</option>"
            for v, label in values
        ]
    return "".join(options)


def create_form_html(services: Services, owner: Owner, values: dict[str, str]) -> str:
    return (
        '<form class="card" method="post" action="/dashboard/invoices/new" id="create-form">'
        f"{csrf_input_html(owner.csrf)}"
        '<div class="field"><label for="c-asset">Token and chain</label>'
        f'<select id="c-asset" name="asset">{_token_choices(services, values.get("asset", ""))}'
        "</select></div>"
        '<div class="field"><label for="c-amount">Amount</label>'
        f'<input id="c-amount" name="amount" required inputmode="decimal"'
        f"{attrs(value=values.get('amount'))}></div>"
        '<div class="field"><label for="c-currency">Amount is in (optional: a currency such as '
        "USD; the token amount is then locked at today's rate)</label>"
        f'<input id="c-currency" name="currency" maxlength="3" size="5" list="c-currencies" '
        f'autocomplete="off"{attrs(value=values.get("currency"))}>'
        f'<datalist id="c-currencies">{CURRENCY_OPTIONS}</datalist></div>'
        '<div class="field"><label for="c-id">Invoice id (optional: numbered for you)</label>'
        f'<input id="c-id" name="invoiceId" maxlength="128"{attrs(value=values.get("invoiceId"))}>'
        "</div>"
        '<div class="field"><label for="c-description">Description</label>'
        f'<textarea id="c-description" name="description" maxlength="1000" rows="3">'
        f"{e(values.get('description', ''))}</textarea></div>"
        '<div class="field"><label for="c-expiry">Expires after (minutes; empty: the '
        "service's default)</label>"
        f'<input id="c-expiry" name="expiresInMinutes" type="number" min="1" '
        f'max="{MAX_EXPIRY_MINUTES}"{attrs(value=values.get("expiresInMinutes"))}></div>'
        '<div class="field"><label for="c-redirect">After payment, send the payer to '
        "(optional, https URL)</label>"
        f'<input id="c-redirect" name="redirectUrl" type="url" maxlength="2048" size="50"'
        f"{attrs(value=values.get('redirectUrl'))}></div>"
        '<div class="field"><label for="c-cancel">If the payer cancels, send them to '
        "(optional, https URL)</label>"
        f'<input id="c-cancel" name="cancelUrl" type="url" maxlength="2048" size="50"'
        f"{attrs(value=values.get('cancelUrl'))}></div>"
        '<button type="submit">Create</button></form>'
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
    return html("Create an invoice", create_form_html(services, owner, {}), owner, "create")


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
        body = notice_html(exc.message, error=True) + create_form_html(services, owner, fields)
        return html("Create an invoice", body, owner, "create", exc.status)
    url = payment_url(settings.payment_page_url, invoice.payment_address)
    body = (
        f'<p class="notice" role="status">Invoice {e(invoice.invoice_id)} created.</p>'
        '<section class="card" id="created">'
        f'<p>Hosted payment page: <a id="hosted-url" href="{e(url)}">{e(url)}</a> '
        f'<button type="button" class="secondary" data-copy="{e(url)}">Copy</button></p>'
        f'<p class="qr"><img id="created-qr" src="/pay/{e(invoice.payment_address)}/qr.svg" '
        f'alt="QR code of the payment request for {e(invoice.invoice_id)}"></p>'
        f'<p><a href="/dashboard/invoices/{e(invoice.id)}" id="created-detail">Open the invoice'
        "</a></p></section>" + create_form_html(services, owner, {})
    )
    return html("Create an invoice", body, owner, "create", 201)
