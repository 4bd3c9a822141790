"""One invoice: amounts and balances per asset, its events, the explorer links of its
sweeps and refunds, its webhook deliveries with every attempt and a redeliver button, and
the refund form the wallet signs (after the sweep, the refund the wallet pays:
``wallet_refund``). Its summary refreshes itself (htmx), so a payment shows
without a reload."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.actions.keys import send_again
from invoicing.errors import ChainUnavailable, ServiceError, UnsupportedChain
from invoicing.invoices.fiat import at_rate, paid_rates_of
from invoicing.invoices.history import History, invoice_history
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.views import payment_url
from invoicing.monitor.check import recheck_invoice
from invoicing.refunds.claims import CLAIMABLE, claim_of
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.rates import PaidRate
from invoicing.tables.refunds import RefundClaim
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import (
    amount_text,
    chain_name,
    explorer_link,
    html_page,
    symbol,
)
from invoicing.web.dashboard.render import HEADERS, dashboard_html, invoice_badge, utc_text
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields
from invoicing.web.dashboard.webhooks import attempt_lines
from invoicing.web.dashboard.words import event_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
REFRESH_S = 3


def _fact(text: str, span: str | None = None) -> dict[str, str | None]:
    """A fact's text, and the id of the span it sits in (tests and scripts read it)."""
    return {"text": text, "span": span}


def summary(services: Services, found: History, paid: PaidRate | None = None) -> dict[str, Any]:
    """The invoice's live part: status, balances, its sweeps and refunds, its events (what
    ``dashboard/invoice_summary.html`` draws)."""
    i = found.invoice
    token = symbol(services, i.chain_id, i.token_address)
    balances = [(f"Received ({token})", _fact(amount_text(i.balance_raw, i.decimals), "received"))]
    for other in found.other_balances:
        other_token = symbol(services, i.chain_id, other["tokenAddress"])
        balances.append(
            (f"Also in the escrow ({other_token})", _fact(other["balanceRaw"] + " raw"))
        )
    facts = [
        ("Status", invoice_badge(i.status, i.balance_raw)),
        ("Amount", _fact(f"{i.amount} {token}")),
        *_price_facts(i, token, paid),
        *balances,
        ("Paid at", _fact(utc_text(i.paid_at))),
        ("Swept at", _fact(utc_text(i.withdrawn_at))),
    ]
    return {
        "id": i.id,
        "live": i.status in ("pending", "expired", "paid") or bool(found.refunds),
        "refresh_s": REFRESH_S,
        "facts": facts,
        "payments": _payments(services, found),
        "transactions": _transactions(services, found),
        "events": [
            {"type": ev.type, "words": event_words(ev.type), "created": utc_text(ev.created_at)}
            for ev in found.events
        ],
    }


def _price_facts(i: Invoice, token: str, paid: PaidRate | None) -> list[tuple[str, object]]:
    """The fiat price locked at creation, else the value at the rate when it was paid, and
    an underpayment accepted under the owner's tolerance, when the invoice has them
    (docs/integration/pricing.md)."""
    facts: list[tuple[str, object]] = []
    if i.currency is not None:
        price = f"{i.fiat_amount} {i.currency} at {i.rate} {i.currency} per {token}"
        facts.append(("Price", _fact(price, "price")))
    if paid is not None and paid.rate is not None and paid.currency != i.currency:
        value = at_rate(i, paid.rate, paid.currency)
        worth = f"{value} {paid.currency} at {paid.rate} {paid.currency} per {token} when paid"
        facts.append(("Value", _fact(worth, "fiat-value")))
    if i.shortfall_raw is not None:
        short = amount_text(i.shortfall_raw, i.decimals)
        facts.append(("Accepted short by", _fact(f"{short} {token}", "shortfall")))
    return facts


def _facts(services: Services, found: History) -> list[tuple[str, object]]:
    i = found.invoice
    return [
        ("Invoice", i.invoice_id),
        ("Chain", chain_name(services, i.chain_id)),
        ("Token", i.token_address or "native coin"),
        ("Payment address", explorer_link(services, i.chain_id, "address", i.payment_address)),
        ("Hosted page", payment_url(services.settings.payment_page_url, i.payment_address)),
        ("Description", i.description or "–"),
        ("Created", utc_text(i.created_at)),
        ("Expires", utc_text(i.expires_at)),
        ("Escrow salt", i.salt),
    ]


def _amount(found: History, amount_raw: str, token_address: str | None) -> str:
    """An amount in the invoice's token as a decimal; in another token, in raw units."""
    i = found.invoice
    if token_address == i.token_address:
        return amount_text(amount_raw, i.decimals)
    return amount_raw + " raw"


def _payments(services: Services, found: History) -> list[dict[str, object]]:
    """The payments of record: who sent what, in which transaction (``invoices.payments``)."""
    i = found.invoice
    return [
        {
            "sender": payment["from"],
            "amount": _amount(found, payment["amountRaw"], payment["tokenAddress"]),
            "block": str(payment["blockNumber"]),
            "tx": explorer_link(services, i.chain_id, "tx", payment["txHash"]),
        }
        for payment in found.payments
    ]


def _transactions(services: Services, found: History) -> list[dict[str, object]]:
    i = found.invoice
    return [
        {
            "what": "sweep",
            "status": sweep.status,
            "amount": amount_text(sweep.moved_raw or sweep.amount_raw, i.decimals),
            "tx": explorer_link(services, i.chain_id, "tx", sweep.tx_hash),
        }
        for sweep in found.sweeps
    ] + [
        {
            "what": f"refund to {refund['to']}",
            "status": refund["status"],
            "amount": _amount(found, refund["amountRaw"], refund["tokenAddress"]),
            "tx": explorer_link(services, i.chain_id, "tx", refund["txHash"]),
        }
        for refund in found.refunds
    ]


def _deliveries(found: History) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for item in found.deliveries:
        d = item.delivery
        redeliver = None
        if d.event_id is not None:
            target = f"?endpoint={d.endpoint_id}" if d.endpoint_id else ""
            redeliver = f"/dashboard/events/{d.event_id}/redeliver{target}"
        rows.append(
            {
                "url": d.url,
                "status": d.status,
                "attempts": attempt_lines(item.attempts),
                "redeliver": redeliver,
            }
        )
    return rows


def _refund(services: Services, found: History, claim: RefundClaim | None) -> dict[str, object]:
    """The refund form: signed (paid from the escrow), or, once the invoice was swept, sent
    from the owner's wallet (``wallet_refund``); to the address the payer claimed by the
    refund claim link when there is one, else the first payer of record (the signed form
    leaves it blank then)."""
    i = found.invoice
    claimed = claim.address if claim is not None else None
    now_ms = services.clock.now_ms()
    return {
        "from_wallet": i.status == InvoiceStatus.COMPLETED,
        "token": symbol(services, i.chain_id, i.token_address),
        "payer": claimed or (found.payments[0]["from"] if found.payments else ""),
        "claimed": claimed or "",
        "claimable": i.status in CLAIMABLE,
        "claim": None
        if claim is None
        else {
            "address": claimed,
            "expires": utc_text(claim.expires_at),
            "expired": claim.expires_at <= now_ms,
            "approved": claim.approved_at is not None,
        },
    }


@router.get("/invoices/{invoice_pk}", response_class=HTMLResponse)
async def invoice_page(request: Request, invoice_pk: str, owner: SignedIn) -> HTMLResponse:
    return await render_invoice(request, invoice_pk, owner, request.query_params.get("notice"))


async def render_invoice(
    request: Request, invoice_pk: str, owner: Owner, notice: str | None, claim_url: str = ""
) -> HTMLResponse:
    """The invoice's page; ``claim_url``: a refund claim link just made, shown this once."""
    services = services_of(request)
    found = await invoice_history(services.db, owner.key, invoice_pk)
    claim = await claim_of(services.db, found.invoice.id)
    return html_page(
        "invoice.html",
        f"Invoice {found.invoice.invoice_id}",
        owner,
        "invoices",
        notice=notice,
        summary=summary(services, found, await _paid_rate(services, invoice_pk)),
        facts=_facts(services, found),
        deliveries=_deliveries(found),
        refund=_refund(services, found, claim),
        claim_url=claim_url,
    )


@router.get("/invoices/{invoice_pk}/summary", response_class=HTMLResponse)
async def invoice_summary(request: Request, invoice_pk: str, owner: SignedIn) -> HTMLResponse:
    """The live part. A pending or expired invoice is re-checked on the chain first, as the
    API's status lookup does (``monitor.check.recheck_invoice``), so a payment shows at once."""
    services = services_of(request)
    found = await invoice_history(services.db, owner.key, invoice_pk)
    if found.invoice.status in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED):
        try:
            rechecked = await recheck_invoice(services, found.invoice)
        except (ChainUnavailable, UnsupportedChain):
            rechecked = found.invoice  # the monitor catches up; the page keeps working
        if (
            rechecked.status != found.invoice.status
            or rechecked.balance_raw != found.invoice.balance_raw
        ):
            found = await invoice_history(services.db, owner.key, invoice_pk)
    paid = await _paid_rate(services, invoice_pk)
    body = dashboard_html("invoice_summary.html", summary=summary(services, found, paid))
    return HTMLResponse(body, headers=HEADERS)


async def _paid_rate(services: Services, invoice_pk: str) -> PaidRate | None:
    return (await paid_rates_of(services.db, [invoice_pk])).get(invoice_pk)


@router.post("/events/{event_id}/redeliver")
async def redeliver_event(request: Request, event_id: str, owner: SignedIn) -> Response:
    """Send an event again (to the endpoint named, or the paid webhook), as the API's
    redeliver does, within the same hourly limit; back to the page it came from."""
    services = services_of(request)
    fields = await form_fields(request, services.settings.max_body_bytes)
    endpoint = request.query_params.get("endpoint") or None
    invoice = fields.get("invoice", "")
    safe = invoice and len(invoice) <= 36 and all(c.isalnum() or c == "-" for c in invoice)
    back = f"/dashboard/invoices/{invoice}" if safe else f"/dashboard/events/{quote(event_id)}"
    try:
        await send_again(services, owner.key, event_id[:36], endpoint[:36] if endpoint else None)
    except ServiceError as exc:
        return html_page("message.html", "Redeliver", owner, "", exc.status, error=exc.message)
    return RedirectResponse(f"{back}?notice=Redelivery+queued", status_code=303)
