"""The invoices list (filters, search, keyset paging, live first page) and its CSV export.

The export is exactly the filtered list: the same filter object drives both
(``invoices.browse``), and the export is streamed in chunks.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, StreamingResponse

from invoicing.addresses import normalize_address
from invoicing.errors import InvalidRequest
from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.browse import (
    NATIVE,
    BrowseFilter,
    browse_invoices,
    count_invoices,
    export_invoices,
)
from invoicing.invoices.fiat import paid_rates_of, shown_value
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.services import Services
from invoicing.tables.rates import PaidRate
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import (
    amount_text,
    chain_name,
    fiat_fact,
    html_page,
    reporting_currency,
    short_amount_text,
    symbol,
)
from invoicing.web.dashboard.render import (
    HEADERS,
    dashboard_html,
    invoice_badge,
    short_address,
    utc_text,
)
from invoicing.web.dashboard.session import Owner, SignedIn
from invoicing.web.dashboard.words import count_words

router = APIRouter(prefix="/dashboard", include_in_schema=False)

PAGE_SIZE = 50
# The list counts its matches up to this many (a count of 100,000 rows costs a page's time).
COUNT_UP_TO = 10_001
REFRESH_S = 5
FILTER_KEYS = ("status", "chain", "token", "from", "to", "q", "failing")
CSV_COLUMNS = (
    "id",
    "invoiceId",
    "chainId",
    "paymentAddress",
    "tokenAddress",
    "amount",
    "requiredRaw",
    "balanceRaw",
    "received",
    "status",
    "createdAt",
    "expiresAt",
    "paidAt",
    "withdrawnAt",
    "description",
    "fiatValue",
    "fiatCurrency",
    "fiatBasis",
)
# How fiatValue was found (docs/dashboard.md): the invoice's own price, or its amount at the
# rate recorded when it was paid.
FIAT_BASIS = {True: "price", False: "rate at payment"}


def _day_ms(text: str, name: str) -> int:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(f"{name}: a date as YYYY-MM-DD") from None
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def parse_filter(owner: Owner, params: dict[str, str]) -> BrowseFilter:
    """The list's filter from its query parameters (400 for a bad one)."""
    status = params.get("status") or None
    if status is not None and status not in tuple(InvoiceStatus):
        raise InvalidRequest(f"status: one of {', '.join(InvoiceStatus)}")
    chain = params.get("chain") or None
    if chain is not None and not (chain.isascii() and chain.isdigit() and len(chain) < 19):
        raise InvalidRequest("chain: a chain id")
    token = params.get("token") or None
    if token is not None and token != NATIVE:
        try:
            token = normalize_address(token)
        except ValueError:
            raise InvalidRequest('token: a token address, or "native"') from None
    search = (params.get("q") or "").strip()[:128] or None
    date_to = params.get("to") or None
    return BrowseFilter(
        owner_key=owner.key,
        status=status,
        chain_id=int(chain) if chain else None,
        token=token,
        date_from=_day_ms(params["from"], "from") if params.get("from") else None,
        # "to" is inclusive of its day.
        date_to=_day_ms(date_to, "to") + 86_400_000 if date_to else None,
        search=search,
        webhook_failing=params.get("failing") == "1",
    )


def _params(request: Request) -> dict[str, str]:
    return {key: request.query_params.get(key, "") for key in FILTER_KEYS}


def _query(params: dict[str, str], **more: str) -> str:
    kept = {k: v for k, v in params.items() if v} | {k: v for k, v in more.items() if v}
    return urlencode(kept)


def _token_options(services: Services) -> list[tuple[str, str]]:
    options = [("", "Any token"), (NATIVE, "Native coin")]
    for chain in services.chains.all():
        options += [(t.address, f"{t.symbol} ({chain.config.name})") for t in chain.config.tokens]
    return options


def _filters(services: Services, params: dict[str, str]) -> dict[str, Any]:
    """What the filter form offers, and ``params``: what it shows chosen."""
    return {
        "params": params,
        "statuses": list(InvoiceStatus),
        "chains": [(str(c.config.chain_id), c.config.name) for c in services.chains.all()],
        "tokens": _token_options(services),
    }


async def results(
    services: Services, owner: Owner, params: dict[str, str], cursor: str | None
) -> dict[str, object]:
    """One page of the list (what ``dashboard/invoice_results.html`` draws); live (polled)
    on the first page."""
    query = parse_filter(owner, params)
    found = await browse_invoices(services.db, query, cursor, PAGE_SIZE)
    total = await count_invoices(services.db, query, COUNT_UP_TO)
    currency = await reporting_currency(services, owner)
    rates = await paid_rates_of(services.db, [i.id for i in found.items])
    rows = [
        {
            "id": i.id,
            "invoice_id": i.invoice_id,
            "badge": invoice_badge(i.status, i.balance_raw),
            "amount": short_amount_text(
                i.required_raw, i.decimals, symbol(services, i.chain_id, i.token_address)
            ),
            "fiat": fiat_fact(shown_value(i, rates.get(i.id), currency)),
            "received": amount_text(i.balance_raw, i.decimals),
            "chain": chain_name(services, i.chain_id),
            "payment_address": i.payment_address,
            "short_address": short_address(i.payment_address),
            "created": utc_text(i.created_at),
        }
        for i in found.items
    ]
    if total >= COUNT_UP_TO:
        shown = f"More than {COUNT_UP_TO - 1:,} invoices match."
    else:
        shown = count_words(total, "invoice matches", "invoices match") + "."
    return {
        "invoices": rows,
        "shown": shown,
        "live": not cursor,
        "refresh_s": REFRESH_S,
        "query": _query(params),
        "first_page": _query(params) if cursor else None,
        "next_page": _query(params, after=found.next_cursor) if found.next_cursor else None,
    }


@router.get("/invoices", response_class=HTMLResponse)
async def invoices_page(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    params = _params(request)
    filters = _filters(services, params)
    try:
        found = await results(services, owner, params, request.query_params.get("after"))
    except InvalidRequest as exc:
        return html_page(
            "invoices.html", "Invoices", owner, "invoices", 400, error=exc.message, **filters
        )
    return html_page(
        "invoices.html",
        "Invoices",
        owner,
        "invoices",
        error=None,
        results=found,
        export_query=_query(params),
        **filters,
    )


@router.get("/invoices/results", response_class=HTMLResponse)
async def invoices_results(request: Request, owner: SignedIn) -> HTMLResponse:
    """The first page of the list alone (htmx polls it, so new payments show)."""
    services = services_of(request)
    found = await results(services, owner, _params(request), None)
    return HTMLResponse(dashboard_html("invoice_results.html", results=found), headers=HEADERS)


# A cell a spreadsheet would run as a formula gets a leading apostrophe (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: str | None) -> str:
    if not text:
        return ""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _csv_row(row: Any, currency: str | None) -> tuple[object, ...]:
    paid = None
    if row.paid_rate_currency is not None:
        paid = PaidRate(currency=row.paid_rate_currency, rate=row.paid_rate)
    fiat = shown_value(row, paid, currency)
    return (
        row.id,
        _cell(row.invoice_id),
        row.chain_id,
        row.payment_address,
        row.token_address or "",
        row.amount,
        row.required_raw,
        row.balance_raw,
        to_decimal_string(int(row.balance_raw), row.decimals),
        row.status,
        row.created_at,
        row.expires_at,
        "" if row.paid_at is None else row.paid_at,
        "" if row.withdrawn_at is None else row.withdrawn_at,
        _cell(row.description),
        "" if fiat is None else str(fiat.amount),
        "" if fiat is None else fiat.currency,
        "" if fiat is None else FIAT_BASIS[fiat.locked],
    )


async def _csv_lines(
    services: Services, query: BrowseFilter, currency: str | None
) -> AsyncIterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    async for rows in export_invoices(services.db, query):
        writer.writerows(_csv_row(row, currency) for row in rows)
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():  # nothing matched: the header alone
        yield buffer.getvalue()


@router.get("/invoices.csv")
async def invoices_csv(request: Request, owner: SignedIn) -> StreamingResponse:
    """The filtered list as CSV, newest first, streamed."""
    services = services_of(request)
    query = parse_filter(owner, _params(request))
    stamp = datetime.fromtimestamp(services.clock.now_ms() / 1000, tz=UTC).strftime("%Y%m%d")
    currency = await reporting_currency(services, owner)
    return StreamingResponse(
        _csv_lines(services, query, currency),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="invoices-{stamp}.csv"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )
