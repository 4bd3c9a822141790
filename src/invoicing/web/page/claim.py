"""The payer's side of a refund claim link (``refunds.claims``): ``/refund-claim/<token>``
asks for the address the refund should go to, in the payment page's languages and layout.
No wallet is needed: a plain form, posted back to the same address.

Public: the token is the only key. Every request counts against the client's payment page
rate limit first. An unknown, expired or revoked token gets the 404 page; a bad address the
form again with its error (400); once the owner approved, the page shows the state and a
post changes nothing (409).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from invoicing.errors import Conflict, InvalidRequest, NotFound
from invoicing.refunds.claims import open_claim, submit_address
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import RefundClaim
from invoicing.web.context import services_of
from invoicing.web.page.i18n import PageLocale
from invoicing.web.page.render import error_page, site_values, template
from invoicing.web.page.routes import PAGE_HEADERS, LangParam, limit_client, page_locale
from invoicing.web.page.view import payment_view

router = APIRouter(
    prefix="/refund-claim", include_in_schema=False, dependencies=[Depends(limit_client)]
)
# The payment page's headers, but this page's form posts back to itself.
HEADERS = {
    **PAGE_HEADERS,
    "Content-Security-Policy": PAGE_HEADERS["Content-Security-Policy"].replace(
        "form-action 'none'", "form-action 'self'"
    ),
}
MAX_FORM_BYTES = 1024


def claim_form(body: bytes) -> str:
    """The ``address`` field of the posted form ('' when missing); 400 for a body that is
    not a small UTF-8 urlencoded form."""
    if len(body) > MAX_FORM_BYTES:
        raise InvalidRequest("the form is too large", {"field": "address"})
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form is not readable", {"field": "address"}) from None
    return dict(pairs).get("address", "")


@router.get("/{token}", response_class=HTMLResponse)
async def claim_page(request: Request, token: str, lang: LangParam = None) -> HTMLResponse:
    locale = page_locale(request, lang)
    services = services_of(request)
    try:
        claim = await open_claim(services.db, token, services.clock.now_ms())
    except NotFound:
        return _not_found(locale)
    return await _page(request, locale, token, claim)


@router.post("/{token}", response_class=HTMLResponse)
async def claim_submit(request: Request, token: str, lang: LangParam = None) -> HTMLResponse:
    locale = page_locale(request, lang)
    services = services_of(request)
    now_ms = services.clock.now_ms()
    try:
        claim = await open_claim(services.db, token, now_ms)
    except NotFound:
        return _not_found(locale)
    text = ""
    try:
        text = claim_form(await request.body())
        claim = await submit_address(services.db, token, text, now_ms)
    except NotFound:
        return _not_found(locale)
    except InvalidRequest:
        return await _page(request, locale, token, claim, error=True, typed=text, status=400)
    except Conflict:
        return await _page(request, locale, token, claim, status=409)
    return await _page(request, locale, token, claim, saved=True)


def _not_found(locale: PageLocale) -> HTMLResponse:
    _ = locale.gettext.gettext
    body = error_page(
        locale,
        404,
        _("Refund link not found"),
        _("This refund link is unknown, expired or revoked. Ask the merchant for a new one."),
    )
    return HTMLResponse(body, status_code=404, headers=HEADERS)


async def _page(
    request: Request,
    locale: PageLocale,
    token: str,
    claim: RefundClaim,
    *,
    error: bool = False,
    typed: str = "",
    saved: bool = False,
    status: int = 200,
) -> HTMLResponse:
    services = services_of(request)
    async with services.db.sessions() as session:
        invoice = await session.get(Invoice, claim.invoice_id)
    assert invoice is not None
    view = await payment_view(services.chains, invoice, services.clock.now_ms())
    path = f"/refund-claim/{token}"
    body = template(locale.language, "refund_claim.html").render(
        **site_values(locale, path),
        action=f"{path}?lang={locale.language.code}",
        invoice_id=invoice.invoice_id,
        network=view.network,
        symbol=view.symbol,
        address=claim.address,
        approved=claim.approved_at is not None,
        expires_text=locale.time(claim.expires_at),
        error=error,
        typed=typed[:100] if error else (claim.address or ""),
        saved=saved,
    )
    return HTMLResponse(body, status_code=status, headers=HEADERS)
