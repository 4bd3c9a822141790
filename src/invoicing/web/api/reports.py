"""The payments report (docs/integration/reports.md): both modes.

``GET /integration/reports/payments`` (``reports.payments``): an owner's payments with
``dateFrom <= paidAt < dateTo`` (unix ms, the time of the payment's block), optionally only
invoices priced in ``currency``; ``format=csv`` streams every row, ``format=json`` answers
a page (``limit``, ``cursor``). Rows come from ``reports.sources.PAYMENTS_OF_RECORD``: one
per payment of record.
"""

from __future__ import annotations

from typing import Literal, Self

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from invoicing.errors import InvalidRequest
from invoicing.reports.payments import (
    MAX_PAGE,
    PaymentRow,
    ReportQuery,
    decode_cursor,
    report_csv,
    report_page,
)
from invoicing.reports.sources import PAYMENTS_OF_RECORD, split_key
from invoicing.web.api.deps import authorized_query
from invoicing.web.api.inputs import Address
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import OWNER_ROUTE_ERRORS, Answer, documented, schema_ref

router = APIRouter(prefix="/integration/reports", tags=["reports"])

CSV = "text/csv"
MAX_MS = 2**53  # unix ms far beyond any date, and exact in JavaScript


class PaymentsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    dateFrom: int = Field(ge=0, lt=MAX_MS, description="Paid at or after (unix ms, block time).")
    dateTo: int = Field(gt=0, le=MAX_MS, description="Paid before (unix ms, block time).")
    currency: str | None = Field(
        default=None,
        pattern=r"^[A-Z]{3}$",
        description="Only invoices priced in this fiat currency (ISO 4217, e.g. EUR).",
    )
    format: Literal["csv", "json"] = "csv"
    limit: int = Field(default=100, ge=1, le=MAX_PAGE, description="Rows a page (json).")
    cursor: str | None = Field(default=None, max_length=200, description="nextCursor (json).")

    @model_validator(mode="after")
    def _a_window(self) -> Self:
        if self.dateFrom >= self.dateTo:
            raise ValueError("dateFrom must be before dateTo")
        if self.format == "csv" and self.cursor is not None:
            raise ValueError("cursor pages the json format; csv streams every row")
        return self


class PaymentLine(WireModel):
    """One payment (amounts as decimal strings in the token's units; unknown: empty)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    invoiceId: str
    paymentAddress: str
    chainId: int
    token: str = Field(description='The token\'s address, or "native".')
    amount: str
    paidAt: int = Field(description="The time of the payment's block (unix ms).")
    txHash: str = Field(description="The payment's transaction.")
    from_: str = Field(alias="from", description="The payer's address.")
    fiatCurrency: str
    fiatAmount: str
    rate: str
    fee: str = Field(description="The service fee taken when the payment was swept.")
    sweepTxHash: str

    @classmethod
    def of(cls, row: PaymentRow) -> Self:
        values = {name: value for name, value in vars(row).items() if name != "key"}
        return cls(**values)


class PaymentReport(WireModel):
    items: list[PaymentLine]
    nextCursor: str | None = Field(description="The next page's cursor; null: the last page.")


@router.get(
    "/payments",
    **documented(
        "An owner's payments in a period (CSV, or JSON pages)",
        sdk="reports.payments",
        query=PaymentsQuery,
        errors=OWNER_ROUTE_ERRORS,
        ok_response={
            "description": "format=csv: a header line then one row a payment; "
            "format=json: a PaymentReport page.",
            "content": {
                CSV: {"schema": {"type": "string"}},
                "application/json": {"schema": schema_ref(PaymentReport)},
            },
        },
        action="reports.payments",
    ),
)
async def payments(request: Request) -> Answer[PaymentReport] | StreamingResponse:
    services = services_of(request)
    query, caller = await authorized_query(request, "reports.payments", PaymentsQuery)
    report = ReportQuery(caller.owner_key, query.dateFrom, query.dateTo, query.currency)
    if query.format == "csv":
        name = f"payments-{query.dateFrom}-{query.dateTo}.csv"
        return StreamingResponse(
            report_csv(PAYMENTS_OF_RECORD, services.db, report),
            media_type=f"{CSV}; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    cursor = None
    if query.cursor is not None:
        cursor = decode_cursor(query.cursor)
        if cursor is None or split_key(cursor[1]) is None:
            raise InvalidRequest("cursor: not a cursor of this report")
    rows, next_cursor = await report_page(
        PAYMENTS_OF_RECORD, services.db, report, cursor, query.limit
    )
    return Answer(PaymentReport(items=[PaymentLine.of(r) for r in rows], nextCursor=next_cursor))
