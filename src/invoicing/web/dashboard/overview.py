"""The overview page: 30-day paid volume per token (an SVG chart and its table), counts by
status, and the invoices that need attention. It refreshes itself every few seconds (htmx),
so a payment shows without a reload."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.browse import DAY_MS, Overview, overview
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.dashboard.chart import bar_chart_svg
from invoicing.web.dashboard.common import amount_text, chain_name, html, symbol
from invoicing.web.dashboard.render import HEADERS, badge_html, e, table_html, utc_text
from invoicing.web.dashboard.session import SignedIn

router = APIRouter(prefix="/dashboard", include_in_schema=False)
REFRESH_S = 5


def _day_label(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%b %d")


def _volume_html(services: Services, found: Overview) -> str:
    if not found.volume:
        return '<p class="muted">No invoice was paid in the last 30 days.</p>'
    days = len(next(iter(found.volume.values())))
    labels = [_day_label(found.first_day_ms + day * DAY_MS) for day in range(days)]
    series = []
    rows = []
    for (chain_id, token), values in sorted(found.volume.items(), key=lambda kv: str(kv[0])):
        decimals = found.decimals[(chain_id, token)]
        name = f"{symbol(services, chain_id, token)} on {chain_name(services, chain_id)}"
        # Display units for the bar heights only; every figure shown is exact.
        series.append((name, [value / 10**decimals for value in values]))
        rows.append([e(name), e(to_decimal_string(sum(values), decimals))])
    svg = bar_chart_svg("Paid per day, last 30 days", series, labels)
    return (
        f'<figure class="card chart" id="volume-chart">{svg}'
        '<figcaption class="muted">Invoiced amounts of the invoices paid each day (UTC), '
        "one colour per token.</figcaption></figure>"
        + table_html(["Token", "#Paid in 30 days"], rows, "Paid volume per token")
    )


def overview_body_html(services: Services, found: Overview) -> str:
    stats = "".join(
        f'<a class="stat" href="/dashboard/invoices?status={e(status)}" id="count-{e(status)}">'
        f'<span class="n">{count}</span><span class="l">{e(status)}</span></a>'
        for status, count in found.counts.items()
    )
    attention_rows = [
        [
            f'<a href="/dashboard/invoices/{e(invoice.id)}">{e(invoice.invoice_id)}</a>',
            badge_html(invoice.status),
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
    found = await overview(services.db, owner.key, services.clock.now_ms())
    return html("Overview", overview_body_html(services, found), owner, "overview")


@router.get("/overview", response_class=HTMLResponse)
async def overview_fragment(request: Request, owner: SignedIn) -> HTMLResponse:
    """The overview's live part (htmx polls it)."""
    services = services_of(request)
    found = await overview(services.db, owner.key, services.clock.now_ms())
    return HTMLResponse(overview_body_html(services, found), headers=HEADERS)
