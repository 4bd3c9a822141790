"""Reports: the payments report by month, a CSV download per month (the API's
``GET /integration/reports/payments``, over the session's owner; months in UTC)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, StreamingResponse

from invoicing.errors import InvalidRequest
from invoicing.reports.payments import ReportQuery, report_csv
from invoicing.reports.sources import PAYMENTS_OF_RECORD
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import html_page
from invoicing.web.dashboard.session import SignedIn

router = APIRouter(prefix="/dashboard", include_in_schema=False)

MONTHS_SHOWN = 24
MONTH = re.compile(r"(\d{4})-(\d{2})")


def month_bounds(year: int, month: int) -> tuple[int, int]:
    """(first ms of the month, first ms of the next), UTC."""
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)


def recent_months(now_ms: int, count: int) -> list[tuple[int, int]]:
    """(year, month) of this month and the ``count - 1`` before it, newest first."""
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    index = now.year * 12 + now.month - 1
    return [((index - n) // 12, (index - n) % 12 + 1) for n in range(count)]


@router.get("/reports", response_class=HTMLResponse)
async def reports_page(request: Request, owner: SignedIn) -> HTMLResponse:
    now_ms = services_of(request).clock.now_ms()
    months = [f"{year}-{month:02d}" for year, month in recent_months(now_ms, MONTHS_SHOWN)]
    return html_page("reports.html", "Reports", owner, "reports", months=months)


@router.get("/reports/payments.csv")
async def month_csv(request: Request, owner: SignedIn) -> StreamingResponse:
    found = MONTH.fullmatch(request.query_params.get("month", ""))
    if found is None or not 1 <= int(found.group(2)) <= 12 or int(found.group(1)) < 1970:
        raise InvalidRequest("month: YYYY-MM")
    year, month = int(found.group(1)), int(found.group(2))
    date_from, date_to = month_bounds(year, month)
    services = services_of(request)
    return StreamingResponse(
        report_csv(PAYMENTS_OF_RECORD, services.db, ReportQuery(owner.key, date_from, date_to)),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="payments-{year}-{month:02d}.csv"',
            "Cache-Control": "no-store",
        },
    )
