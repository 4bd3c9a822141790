"""Routes of the hosted payment page (docs/integration/invoices.md): the page, its status
JSON, QR and assets, and a payer's request for a receipt (docs/integration/email.md).

Public and unauthenticated: the paymentAddress in the URL is the only key, and the answers
carry only what the page shows. Every route counts against the client's rate limit
(``INVOICING_PAY_RATE_LIMIT_PER_MINUTE``) before it does anything else.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from invoicing.brand.service import brand_of
from invoicing.db import ProcessLocal
from invoicing.errors import (
    ChainUnavailable,
    Forbidden,
    InvalidRequest,
    InvoiceNotPayable,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UnsupportedChain,
)
from invoicing.invoices.service import invoice_at
from invoicing.monitor.check import recheck_invoice
from invoicing.notifications.mail.choices import MAX_EMAIL_CHARS
from invoicing.notifications.mail.receipts import receipts_offered, request_receipt
from invoicing.payments.eip3009.service import page_offer
from invoicing.ratelimit import hit_deferred
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.web.api.inputs import json_body, validate
from invoicing.web.api.responses import WireModel
from invoicing.web.context import client_network, services_of
from invoicing.web.page.i18n import PageLocale, negotiate
from invoicing.web.page.qr import QrCache
from invoicing.web.page.render import ASSET_TYPES, asset, error_page, payment_page
from invoicing.web.page.view import (
    PaymentStatus,
    PaymentView,
    parse_payment_address,
    payment_view,
)
from invoicing.web.routedocs import (
    PUBLIC,
    Answer,
    documented,
    error_responses,
)

log = logging.getLogger(__name__)


async def _limit_client(request: Request) -> None:
    """Count the request against its client's limit (429 ``rate_limited`` when over)."""
    services = services_of(request)
    settings = services.settings
    client = client_network(request, settings.trusted_proxies)
    await hit_deferred(
        services.db,
        [f"pay-ip:{client}"],
        settings.pay_rate_limit_per_minute,
        services.clock.now_ms(),
    )


LangParam = Annotated[
    str | None,
    Query(
        description="The page's language (en, es, pt, fr, de, zh-Hans, ja, ar; a regional tag "
        "such as pt-BR works too). Without it, or when it names no supported language, the "
        "page follows Accept-Language, then English.",
    ),
]

router = APIRouter(prefix="/pay", tags=["payment page"], dependencies=[Depends(_limit_client)])
limit_client = _limit_client  # every /pay route's limit (web.page.gasless too)


def _html(description: str) -> dict[str, object]:
    return {"description": description, "content": {"text/html": {"schema": {"type": "string"}}}}


CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ASSET_MAX_AGE_S = 24 * 3600


class RecheckThrottle:
    """At most one live chain re-check per invoice per interval, in this process, however
    many payers poll: the public status route must not turn into an RPC amplifier."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def allow(self, invoice_id: str, interval_s: float) -> bool:
        now = time.monotonic()
        if len(self._last) >= self.MAX_ENTRIES:
            self._last = {k: t for k, t in self._last.items() if now - t < interval_s}
        last = self._last.get(invoice_id)
        if last is not None and now - last < interval_s:
            return False
        self._last[invoice_id] = now
        return True


_RECHECK_THROTTLE: ProcessLocal[RecheckThrottle] = ProcessLocal(lambda _db: RecheckThrottle())


async def _fresh_invoice(services: Services, invoice: Invoice) -> Invoice | InvoiceRow:
    """The invoice after a live re-check when one is due; the stored state if the chain is
    unreachable (the page keeps working, the monitor catches up)."""
    interval_s = services.settings.page_recheck_interval_s
    throttle = _RECHECK_THROTTLE.of(services.db)
    if not throttle.allow(invoice.id, interval_s):
        return invoice
    try:
        return await recheck_invoice(services, invoice)
    except (ChainUnavailable, UnsupportedChain) as exc:
        log.warning("payment page re-check of %s skipped: %s", invoice.payment_address, exc)
        return invoice


async def _view(
    request: Request, payment_address: str, *, recheck: bool, with_brand: bool = False
) -> PaymentView:
    """The page's view; ``with_brand``: with the owner's brand (the HTML page only)."""
    services = services_of(request)
    address = parse_payment_address(payment_address)
    found = await invoice_at(services.db, address)
    invoice = await _fresh_invoice(services, found) if recheck else found
    brand = await brand_of(services.db, invoice.owner_key) if with_brand else None
    return await payment_view(services.chains, invoice, services.clock.now_ms(), brand)


@router.get("/assets/{name}", include_in_schema=False)
async def static_asset(name: str) -> Response:
    if name not in ASSET_TYPES:
        raise NotFound("no such asset")
    return Response(
        asset(name),
        media_type=ASSET_TYPES[name],
        headers={
            "Cache-Control": f"public, max-age={ASSET_MAX_AGE_S}",
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.get(
    "/{payment_address}",
    response_class=HTMLResponse,
    **documented(
        "Hosted payment page",
        sdk="public.payment_page",
        auth=PUBLIC,
        ok_response=_html("The payment page"),
        other_responses={
            400: _html("Not a payment address (an HTML error page)"),
            404: _html("No invoice at this address (an HTML error page)"),
            **error_responses([RateLimited]),
        },
    ),
)
async def page(request: Request, payment_address: str, lang: LangParam = None) -> HTMLResponse:
    locale = page_locale(request, lang)
    _ = locale.gettext.gettext
    try:
        view = await _view(request, payment_address, recheck=False, with_brand=True)
    except NotFound:
        return _error(
            locale,
            404,
            _("Payment not found"),
            _("There is no payment request at this address."),
        )
    except InvalidRequest:
        return _error(
            locale, 400, _("Not a payment link"), _("This link does not hold a valid address.")
        )
    services = services_of(request)
    offer = await page_offer(services, view.payment_address)
    receipts = view.status == "pending" and await _receipts_offered(services, view)
    return HTMLResponse(
        payment_page(view, locale, offer, receipts=receipts), headers=_headers(locale)
    )


async def _receipts_offered(services: Services, view: PaymentView) -> bool:
    """Whether the page offers a receipt: the invoice's owner sends them."""
    invoice = await invoice_at(services.db, view.payment_address)
    async with services.db.sessions() as session:
        return await receipts_offered(session, invoice.owner_key)


class ReceiptBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    email: str = Field(min_length=3, max_length=MAX_EMAIL_CHARS, description="A plain address.")


class ReceiptRequested(WireModel):
    """The receipt will be mailed to ``email`` once the invoice is paid."""

    email: str


@router.post(
    "/{payment_address}/receipt",
    **documented(
        "Ask for a receipt by email once the invoice is paid (when the owner sends them)",
        sdk="public.ask_receipt",
        ok=ReceiptRequested,
        body=ReceiptBody,
        auth=PUBLIC,
        errors=(
            InvalidRequest,
            Forbidden,
            NotFound,
            InvoiceNotPayable,
            PayloadTooLarge,
            RateLimited,
        ),
    ),
)
async def receipt(
    request: Request, payment_address: str, lang: LangParam = None
) -> Answer[ReceiptRequested]:
    services = services_of(request)
    body = validate(ReceiptBody, await json_body(request, services.settings.max_body_bytes))
    invoice = await invoice_at(services.db, parse_payment_address(payment_address))
    if invoice.status != "pending" or invoice.deleted_at is not None:
        raise InvoiceNotPayable("this invoice is no longer waiting for a payment")
    language = page_locale(request, lang).language.code
    async with services.db.transaction() as session:
        await request_receipt(
            session,
            invoice.id,
            invoice.owner_key,
            body.email,
            language,
            services.clock.now_ms(),
        )
    return Answer(ReceiptRequested(email=body.email))


def page_locale(request: Request, lang: str | None) -> PageLocale:
    """The request's language: ``?lang=``, else ``Accept-Language``, else English."""
    return PageLocale(negotiate(lang, request.headers.get("accept-language")))


def _headers(locale: PageLocale) -> dict[str, str]:
    return {
        **PAGE_HEADERS,
        "Content-Language": locale.language.code,
        "Vary": "Accept-Language",
    }


@router.get(
    "/{payment_address}/status",
    **documented(
        "Public status of a payment page (CORS)",
        sdk="public.payment_status",
        ok=PaymentStatus,
        auth=PUBLIC,
        errors=(InvalidRequest, NotFound, RateLimited),
    ),
)
async def status(request: Request, payment_address: str) -> Answer[PaymentStatus]:
    view = await _view(request, payment_address, recheck=True)
    return Answer(view.public_status(), headers={"Cache-Control": "no-store"})


@router.get("/{payment_address}/qr.svg", include_in_schema=False)
async def qr(request: Request, payment_address: str, lang: LangParam = None) -> Response:
    """The QR code of the payment request; its ``<title>`` in the page's language."""
    view = await _view(request, payment_address, recheck=False)
    locale = page_locale(request, lang)
    title = locale.gettext.gettext("Pay %(amount)s %(symbol)s") % {
        "amount": locale.amount(view.remaining or view.amount),
        "symbol": view.symbol,
    }
    svg = await qr_cache(services_of(request)).svg(view.payment_address, view.uri, title)
    return Response(
        svg,
        media_type="image/svg+xml",
        headers={
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Language": locale.language.code,
            "Vary": "Accept-Language",
        },
    )


QR_CACHE: ProcessLocal[QrCache] = ProcessLocal(lambda _db: QrCache())


def qr_cache(services: Services) -> QrCache:
    """This process's QR cache for the app's database (tests read its ``stats``)."""
    return QR_CACHE.of(services.db)


def _error(locale: PageLocale, status_code: int, title: str, message: str) -> HTMLResponse:
    return HTMLResponse(
        error_page(locale, status_code, title, message),
        status_code=status_code,
        headers=_headers(locale),
    )
