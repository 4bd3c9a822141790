"""The overview page: 30-day paid volume per token (an SVG chart and its table), counts by
status, and the invoices that need attention. It refreshes itself every few seconds (htmx),
so a payment shows without a reload."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.browse import DAY_MS, Overview, overview
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.dashboard.chart import PALETTE, bar_chart
from invoicing.web.dashboard.common import (
    amount_text,
    chain_name,
    html_page,
    reporting_currency,
    symbol,
)
from invoicing.web.dashboard.render import HEADERS, dashboard_html, invoice_badge, utc_text
from invoicing.web.dashboard.session import SignedIn
from invoicing.web.dashboard.words import STATUS_WORDS, count_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)
REFRESH_S = 5


def _day_label(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%b %d")


def _volume(services: Services, found: Overview) -> dict[str, Any]:
    """Paid volume per token (a chart each, on its own scale), or in the reporting currency."""
    if not found.volume:
        return {"tokens": []}
    days = len(next(iter(found.volume.values())))
    labels = [_day_label(found.first_day_ms + day * DAY_MS) for day in range(days)]
    tokens = []
    charts = []
    for (chain_id, token), values in sorted(found.volume.items(), key=lambda kv: str(kv[0])):
        decimals = found.decimals[(chain_id, token)]
        name = f"{symbol(services, chain_id, token)} on {chain_name(services, chain_id)}"
        tokens.append({"name": name, "paid": to_decimal_string(sum(values), decimals)})
        # Each token on its own scale, in its own unit: amounts of two tokens never share bars.
        whole = [Decimal(value).scaleb(-decimals) for value in values]
        unit = symbol(services, chain_id, token)
        charts.append(bar_chart(f"Paid per day in {name}", unit, [(name, whole)], labels))
    fiat = None if found.currency is None else _fiat_volume(found, labels)
    return {"tokens": tokens, "charts": charts, "fiat": fiat}


def _fiat_volume(found: Overview, labels: list[str]) -> dict[str, Any]:
    currency = found.currency
    assert currency is not None
    name = f"Paid in {currency}"
    unvalued = None
    if found.unvalued:
        unvalued = (
            f"{count_words(found.unvalued, 'paid invoice', 'paid invoices')}"
            f" without a {currency} value (no price source for its token) "
            f"{'is' if found.unvalued == 1 else 'are'} not counted."
        )
    return {
        "total": sum(found.fiat, Decimal(0)),
        "currency": currency,
        "name": name,
        "unvalued": unvalued,
        "chart": bar_chart("Paid per day, last 30 days", currency, [(name, found.fiat)], labels),
    }


def overview_body(services: Services, found: Overview) -> dict[str, Any]:
    """What ``dashboard/overview_body.html`` draws."""
    stats = [
        {"status": status, "count": f"{count:,}", "words": STATUS_WORDS.get(status, status)}
        for status, count in found.counts.items()
    ]
    attention = [
        {
            "id": invoice.id,
            "invoice_id": invoice.invoice_id,
            "badge": invoice_badge(invoice.status, invoice.balance_raw),
            "why": ", ".join(reasons),
            "received": f"{amount_text(invoice.balance_raw, invoice.decimals)} / "
            f"{invoice.amount} {symbol(services, invoice.chain_id, invoice.token_address)}",
            "created": utc_text(invoice.created_at),
        }
        for invoice, reasons in found.attention
    ]
    return {
        "refresh_s": REFRESH_S,
        "stats": stats,
        "volume": _volume(services, found),
        "attention": attention,
        "palette": PALETTE,
    }


@router.get("", response_class=HTMLResponse)
async def overview_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    currency = await reporting_currency(services, owner)
    found = await overview(services.db, owner.key, services.clock.now_ms(), currency=currency)
    return html_page(
        "overview.html", "Overview", owner, "overview", **overview_body(services, found)
    )


@router.get("/overview", response_class=HTMLResponse)
async def overview_fragment(request: Request, owner: SignedIn) -> HTMLResponse:
    """The overview's live part (htmx polls it)."""
    services = services_of(request)
    currency = await reporting_currency(services, owner)
    found = await overview(services.db, owner.key, services.clock.now_ms(), currency=currency)
    body = dashboard_html("overview_body.html", **overview_body(services, found))
    return HTMLResponse(body, headers=HEADERS)
