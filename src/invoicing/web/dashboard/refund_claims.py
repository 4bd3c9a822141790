"""The owner's side of refund claim links (``refunds.claims``): make one for a paid or
completed invoice (the page shows it this once: only its hash is kept) or revoke it. The
claimed address then fills the refund forms of the invoice's page; the owner's signature on
the refund approves it."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.errors import ServiceError
from invoicing.invoices.history import invoice_history
from invoicing.refunds.claims import create_claim, revoke_claim
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.detail import render_invoice
from invoicing.web.dashboard.session import SignedIn

router = APIRouter(prefix="/dashboard", include_in_schema=False)


def claim_link(payment_page_url: str, token: str) -> str:
    return f"{payment_page_url.rstrip('/')}/refund-claim/{token}"


@router.post("/invoices/{invoice_pk}/refund-claim", response_class=HTMLResponse)
async def make_claim_link(request: Request, invoice_pk: str, owner: SignedIn) -> Response:
    services = services_of(request)
    invoice = (await invoice_history(services.db, owner.key, invoice_pk)).invoice
    try:
        token = await create_claim(services.db, invoice, services.clock.now_ms())
    except ServiceError as exc:
        title = "Refund claim link"
        return html_page("message.html", title, owner, "", exc.status, error=exc.message)
    url = claim_link(services.settings.payment_page_url, token)
    notice = "Refund claim link made: copy it now, it is shown only once"
    return await render_invoice(request, invoice_pk, owner, notice, claim_url=url)


@router.post("/invoices/{invoice_pk}/refund-claim/revoke")
async def revoke_claim_link(request: Request, invoice_pk: str, owner: SignedIn) -> Response:
    services = services_of(request)
    invoice = (await invoice_history(services.db, owner.key, invoice_pk)).invoice
    await revoke_claim(services.db, invoice.id)
    return RedirectResponse(
        f"/dashboard/invoices/{invoice.id}?notice=Refund+claim+link+revoked", status_code=303
    )
