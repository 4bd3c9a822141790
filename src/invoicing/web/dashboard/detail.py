"""One invoice: amounts and balances per asset, its events, the explorer links of its
sweeps and refunds, its webhook deliveries with every attempt and a redeliver button, and
the refund form the wallet signs (after the sweep, the refund the wallet pays:
``wallet_refund``). Its summary refreshes itself (htmx), so a payment shows
without a reload."""

from __future__ import annotations

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
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.rates import PaidRate
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import (
    amount_text,
    chain_name,
    explorer_link_html,
    html,
    symbol,
)
from invoicing.web.dashboard.render import (
    HEADERS,
    badge_html,
    csrf_input_html,
    e,
    facts_html,
    invoice_badge_html,
    notice_html,
    table_html,
    utc_text,
)
from invoicing.web.dashboard.session import Owner, SignedIn, form_fields
from invoicing.web.dashboard.wallet_refund import wallet_refund_form_html
from invoicing.web.dashboard.words import event_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
REFRESH_S = 3


def summary_html(services: Services, found: History, paid: PaidRate | None = None) -> str:
    """The invoice's live part: status, balances, its sweeps and refunds, its events."""
    i = found.invoice
    token = symbol(services, i.chain_id, i.token_address)
    received = amount_text(i.balance_raw, i.decimals)
    live = (
        f' hx-get="/dashboard/invoices/{e(i.id)}/summary" hx-trigger="every {REFRESH_S}s" '
        'hx-swap="outerHTML"'
        if i.status in ("pending", "expired", "paid") or found.refunds
        else ""
    )
    balances = [(f"Received ({token})", f'<span id="received">{e(received)}</span>')]
    for other in found.other_balances:
        other_token = symbol(services, i.chain_id, other["tokenAddress"])
        balances.append((f"Also in the escrow ({other_token})", e(other["balanceRaw"] + " raw")))
    return (
        f'<section class="card" id="summary" aria-live="polite"{live}>'
        + facts_html(
            [
                (
                    "Status",
                    f'<span id="status">{invoice_badge_html(i.status, i.balance_raw)}</span>',
                ),
                ("Amount", e(f"{i.amount} {token}")),
                *_price_facts(i, token, paid),
                *balances,
                ("Paid at", e(utc_text(i.paid_at))),
                ("Swept at", e(utc_text(i.withdrawn_at))),
            ]
        )
        + "<h2>Payments</h2>"
        + _payments_html(services, found)
        + "<h2>Sweeps and refunds</h2>"
        + _transactions_html(services, found)
        + "<h2>Timeline</h2>"
        + _timeline_html(found)
        + "</section>"
    )


def _price_facts(i: Invoice, token: str, paid: PaidRate | None) -> list[tuple[str, str]]:
    """The fiat price locked at creation, else the value at the rate when it was paid, and
    an underpayment accepted under the owner's tolerance, when the invoice has them
    (docs/integration/pricing.md)."""
    facts = []
    if i.currency is not None:
        price = f"{i.fiat_amount} {i.currency} at {i.rate} {i.currency} per {token}"
        facts.append(("Price", f'<span id="price">{e(price)}</span>'))
    if paid is not None and paid.rate is not None and paid.currency != i.currency:
        value = at_rate(i, paid.rate, paid.currency)
        worth = f"{value} {paid.currency} at {paid.rate} {paid.currency} per {token} when paid"
        facts.append(("Value", f'<span id="fiat-value">{e(worth)}</span>'))
    if i.shortfall_raw is not None:
        short = amount_text(i.shortfall_raw, i.decimals)
        facts.append(("Accepted short by", f'<span id="shortfall">{e(short)} {e(token)}</span>'))
    return facts


def _facts_html(services: Services, found: History) -> str:
    i = found.invoice
    url = payment_url(services.settings.payment_page_url, i.payment_address)
    return facts_html(
        [
            ("Invoice", f'<span class="mono">{e(i.invoice_id)}</span>'),
            ("Chain", e(chain_name(services, i.chain_id))),
            ("Token", e(i.token_address or "native coin")),
            (
                "Payment address",
                explorer_link_html(services, i.chain_id, "address", i.payment_address),
            ),
            ("Hosted page", f'<a href="{e(url)}">{e(url)}</a>'),
            ("Description", e(i.description or "–")),
            ("Created", e(utc_text(i.created_at))),
            ("Expires", e(utc_text(i.expires_at))),
            ("Escrow salt", f'<span class="mono">{e(i.salt)}</span>'),
        ]
    )


def _payments_html(services: Services, found: History) -> str:
    """The payments of record: who sent what, in which transaction (``invoices.payments``)."""
    i = found.invoice
    rows = [
        [
            f'<span class="mono">{e(payment["from"])}</span>',
            e(
                amount_text(payment["amountRaw"], i.decimals)
                if payment["tokenAddress"] == i.token_address
                else payment["amountRaw"] + " raw"
            ),
            e(str(payment["blockNumber"])),
            explorer_link_html(services, i.chain_id, "tx", payment["txHash"]),
        ]
        for payment in found.payments
    ]
    if not rows:
        return '<p class="muted" id="payments">No transfer recorded yet.</p>'
    return table_html(["From", "#Amount", "#Block", "Transaction"], rows, "Payments", "payments")


def _timeline_html(found: History) -> str:
    if not found.events:
        return '<p class="muted">No event yet.</p>'
    items = "".join(
        f'<li><strong title="{e(event.type)}">{e(event_words(event.type))}</strong> · '
        f"{e(utc_text(event.created_at))}</li>"
        for event in found.events
    )
    return f'<ol class="timeline" id="timeline">{items}</ol>'


def _transactions_html(services: Services, found: History) -> str:
    i = found.invoice
    rows = [
        [
            "sweep",
            badge_html(sweep.status),
            e(amount_text(sweep.moved_raw or sweep.amount_raw, i.decimals)),
            explorer_link_html(services, i.chain_id, "tx", sweep.tx_hash),
        ]
        for sweep in found.sweeps
    ] + [
        [
            f"refund to {e(refund['to'])}",
            badge_html(refund["status"]),
            e(
                amount_text(refund["amountRaw"], i.decimals)
                if refund["tokenAddress"] == i.token_address
                else refund["amountRaw"] + " raw"
            ),
            explorer_link_html(services, i.chain_id, "tx", refund["txHash"]),
        ]
        for refund in found.refunds
    ]
    return table_html(
        ["What", "Status", "#Amount", "Transaction"], rows, "Sweeps and refunds", "transactions"
    )


def _deliveries_html(found: History, owner: Owner) -> str:
    rows = []
    for item in found.deliveries:
        d = item.delivery
        attempts = "<br>".join(
            e(
                f"#{a.attempt} {utc_text(a.attempted_at)}: "
                + (f"HTTP {a.status_code}" if a.status_code is not None else (a.error or "error"))
            )
            for a in item.attempts
        )
        action = ""
        if d.event_id is not None:
            target = f"?endpoint={e(d.endpoint_id)}" if d.endpoint_id else ""
            action = (
                f'<form method="post" action="/dashboard/events/{e(d.event_id)}/redeliver{target}">'
                f'{csrf_input_html(owner.csrf)}<input type="hidden" name="invoice" '
                f'value="{e(found.invoice.id)}"><button type="submit" class="secondary">'
                "Redeliver</button></form>"
            )
        rows.append(
            [
                f'<span class="mono">{e(d.url)}</span>',
                badge_html(d.status),
                attempts or '<span class="muted">not tried yet</span>',
                action,
            ]
        )
    return table_html(
        ["Sent to", "Status", "Attempts", ""], rows, "Webhook deliveries", "deliveries"
    )


def _refund_form_html(services: Services, found: History, owner: Owner) -> str:
    i = found.invoice
    token = symbol(services, i.chain_id, i.token_address)
    return (
        f'<form class="card" id="refund-form" method="post" data-sign="refund" '
        f'action="/dashboard/invoices/{e(i.id)}/refund" '
        f'data-prepare="/dashboard/invoices/{e(i.id)}/refund/prepare">'
        f"{csrf_input_html(owner.csrf)}"
        '<p class="muted">Your wallet signs an EIP-712 Refund; the service relays it and pays '
        "the gas. The amount leaves this invoice's escrow.</p>"
        '<div class="field"><label for="refund-to">Refund to (address)</label>'
        '<input id="refund-to" name="to" required autocomplete="off" size="44"></div>'
        f'<div class="field"><label for="refund-amount">Amount ({e(token)})</label>'
        '<input id="refund-amount" name="amount" required inputmode="decimal"></div>'
        '<button type="submit">Sign and refund</button>'
        '<p data-status role="status" aria-live="polite" id="refund-status"></p></form>'
    )


@router.get("/invoices/{invoice_pk}", response_class=HTMLResponse)
async def invoice_page(request: Request, invoice_pk: str, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    found = await invoice_history(services.db, owner.key, invoice_pk)
    notice = request.query_params.get("notice")
    body = (
        notice_html(notice)
        + summary_html(services, found, await _paid_rate(services, invoice_pk))
        + _facts_html(services, found)
        + "<h2>Webhook deliveries</h2>"
        + _deliveries_html(found, owner)
        + "<h2>Refund</h2>"
        + (
            wallet_refund_form_html(services, found, owner)
            if found.invoice.status == InvoiceStatus.COMPLETED
            else _refund_form_html(services, found, owner)
        )
    )
    return html(f"Invoice {found.invoice.invoice_id}", body, owner, "invoices")


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
    return HTMLResponse(summary_html(services, found, paid), headers=HEADERS)


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
        return html("Redeliver", notice_html(exc.message, error=True), owner, "", exc.status)
    return RedirectResponse(f"{back}?notice=Redelivery+queued", status_code=303)
