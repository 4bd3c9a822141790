"""The overview page: 30-day paid volume per token (an SVG chart and its table), counts by
status, and the invoices that need attention. It refreshes itself every few seconds (htmx),
so a payment shows without a reload."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.browse import DAY_MS, Overview, overview
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.dashboard.chart import bar_chart_svg, legend_html
from invoicing.web.dashboard.common import (
    amount_text,
    chain_name,
    html,
    reporting_currency,
    symbol,
)
from invoicing.web.dashboard.render import HEADERS, e, invoice_badge_html, table_html, utc_text
from invoicing.web.dashboard.session import SignedIn
from invoicing.web.dashboard.words import STATUS_WORDS, count_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
REFRESH_S = 5


def _day_label(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%b %d")


def _volume_html(services: Services, found: Overview) -> str:
    if not found.volume:
        return '<p class="muted">No invoice was paid in the last 30 days.</p>'
    days = len(next(iter(found.volume.values())))
    labels = [_day_label(found.first_day_ms + day * DAY_MS) for day in range(days)]
    rows = []
    token_charts = []
    for (chain_id, token), values in sorted(found.volume.items(), key=lambda kv: str(kv[0])):
        decimals = found.decimals[(chain_id, token)]
        name = f"{symbol(services, chain_id, token)} on {chain_name(services, chain_id)}"
        rows.append([e(name), e(to_decimal_string(sum(values), decimals))])
        # Each token on its own scale, in its own unit: amounts of two tokens never share bars.
        whole = [Decimal(value).scaleb(-decimals) for value in values]
        token_charts.append((name, symbol(services, chain_id, token), whole))
    table = table_html(["Token", "#Paid in 30 days"], rows, "Paid volume per token")
    if found.currency is not None:
        return _fiat_volume_html(found, labels) + table
    charts = "".join(
        '<figure class="card chart">'
        + bar_chart_svg(f"Paid per day in {name}", unit, [(name, values)], labels)
        + f"{legend_html([name])}</figure>"
        for name, unit, values in token_charts
    )
    return (
        '<p class="muted" id="no-currency">Amounts are per token. Choose a reporting currency '
        'in <a href="/dashboard/settings#reporting">Settings</a> to see totals in one currency.'
        "</p>" + charts + table
    )


def _fiat_volume_html(found: Overview, labels: list[str]) -> str:
    currency = found.currency
    assert currency is not None
    total = sum(found.fiat, Decimal(0))
    name = f"Paid in {currency}"
    missing = ""
    if found.unvalued:
        missing = (
            '<p class="muted" id="unvalued">'
            f"{e(count_words(found.unvalued, 'paid invoice', 'paid invoices'))}"
            f" without a {e(currency)} value (no price source for its token) "
            f"{'is' if found.unvalued == 1 else 'are'} not counted.</p>"
        )
    svg = bar_chart_svg("Paid per day, last 30 days", currency, [(name, found.fiat)], labels)
    return (
        f'<p class="card"><span class="muted">Paid in the last 30 days</span><br>'
        f'<span class="total" id="fiat-total">{e(total)} {e(currency)}</span></p>'
        f"{missing}"
        f'<figure class="card chart" id="volume-chart">{svg}{legend_html([name])}'
        '<figcaption class="muted">The invoices paid each day (UTC), at their price or at the '
        "rate when they were paid.</figcaption></figure>"
    )


def overview_body_html(services: Services, found: Overview) -> str:
    stats = "".join(
        f'<a class="stat" href="/dashboard/invoices?status={e(status)}" id="count-{e(status)}">'
        f'<span class="n">{count:,}</span>'
        f'<span class="l">{e(STATUS_WORDS.get(status, status))}</span></a>'
        for status, count in found.counts.items()
    )
    attention_rows = [
        [
            f'<a href="/dashboard/invoices/{e(invoice.id)}">{e(invoice.invoice_id)}</a>',
            invoice_badge_html(invoice.status, invoice.balance_raw),
            e(", ".join(reasons)),
            e(
                f"{amount_text(invoice.balance_raw, invoice.decimals)} / {invoice.amount} "
                f"{symbol(services, invoice.chain_id, invoice.token_address)}"
            ),
            e(utc_text(invoice.created_at)),
        ]
        for invoice, reasons in found.attention
    ]
    return (
        f'<div id="overview" hx-get="/dashboard/overview" hx-trigger="every {REFRESH_S}s" '
        'hx-swap="outerHTML">'
        f'<h2>Invoices by status</h2><div class="grid">{stats}</div>'
        f"<h2>Paid volume</h2>{_volume_html(services, found)}"
        "<h2>Needs attention</h2>"
        + table_html(
            ["Invoice", "Status", "Why", "Received / amount", "Created"],
            attention_rows,
            "Invoices that need attention",
            body_id="attention",
        )
        + "</div>"
    )


@router.get("", response_class=HTMLResponse)
async def overview_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    currency = await reporting_currency(services, owner)
    found = await overview(services.db, owner.key, services.clock.now_ms(), currency=currency)
    return html("Overview", overview_body_html(services, found), owner, "overview")


@router.get("/overview", response_class=HTMLResponse)
async def overview_fragment(request: Request, owner: SignedIn) -> HTMLResponse:
    """The overview's live part (htmx polls it)."""
    services = services_of(request)
    currency = await reporting_currency(services, owner)
    found = await overview(services.db, owner.key, services.clock.now_ms(), currency=currency)
    return HTMLResponse(overview_body_html(services, found), headers=HEADERS)
