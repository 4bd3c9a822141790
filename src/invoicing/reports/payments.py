"""The payments report: its query, its row, the source protocol, CSV and paging.

A row source (``PaymentSource``) pages rows in (``paidAt``, key) order after a cursor; the
report streams CSV by walking the pages, and the JSON form hands one page and the cursor
of the next, so both forms hold the same rows. Which rows exist is the source's business
alone (``sources.PAYMENTS_OF_RECORD``: one row per payment of record).
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
from collections.abc import AsyncIterator, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Protocol

from invoicing.db import Database

CSV_CHUNK = 1000
MAX_PAGE = 500


@dataclass(frozen=True)
class ReportQuery:
    """Payments of one owner with ``date_from <= paidAt < date_to`` (unix ms: the time of
    the payment's block); ``currency``: only invoices priced in that fiat currency."""

    owner_key: str
    date_from: int
    date_to: int
    currency: str | None = None


@dataclass(frozen=True)
class PaymentRow:
    """One payment, as the report writes it (amounts in the token's units, as decimals;
    an unknown value is the empty string)."""

    invoiceId: str  # noqa: N815 - the report's column names are its fields' names
    paymentAddress: str  # noqa: N815
    chainId: int  # noqa: N815
    token: str  # the token's address, or "native"
    amount: str
    paidAt: int  # noqa: N815
    txHash: str  # noqa: N815
    # "from" is a Python keyword: the column is written from this field.
    from_: str
    fiatCurrency: str  # noqa: N815
    fiatAmount: str  # noqa: N815
    rate: str
    fee: str
    sweepTxHash: str  # noqa: N815
    key: str  # the source's stable key of the row (a cursor's second part), not a column


COLUMNS = tuple("from" if f.name == "from_" else f.name for f in fields(PaymentRow))[:-1]

Cursor = tuple[int, str]  # (paidAt, key) of the last row handed


class PaymentSource(Protocol):
    async def page(
        self, db: Database, query: ReportQuery, after: Cursor | None, limit: int
    ) -> list[PaymentRow]:
        """Up to ``limit`` rows after ``after``, in (paidAt, key) order."""


def encode_cursor(row: PaymentRow) -> str:
    return base64.urlsafe_b64encode(f"{row.paidAt}:{row.key}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> Cursor | None:
    """The cursor's (paidAt, key); None for one that is not ours."""
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    paid_at, _, key = decoded.partition(":")
    if not (paid_at.isascii() and paid_at.isdigit()) or len(paid_at) > 16 or not key:
        return None
    return int(paid_at), key[:200]


async def report_page(
    source: PaymentSource, db: Database, query: ReportQuery, cursor: Cursor | None, limit: int
) -> tuple[list[PaymentRow], str | None]:
    """One page of rows and the cursor of the next (None: this was the last)."""
    rows = await source.page(db, query, cursor, limit + 1)
    if len(rows) <= limit:
        return rows, None
    return rows[:limit], encode_cursor(rows[limit - 1])


async def report_csv(
    source: PaymentSource, db: Database, query: ReportQuery
) -> AsyncIterator[bytes]:
    """The whole report as CSV, a header line then the rows, read a chunk at a time."""
    yield _csv_lines([COLUMNS])
    after: Cursor | None = None
    while True:
        rows = await source.page(db, query, after, CSV_CHUNK)
        if rows:
            yield _csv_lines([astuple(row)[:-1] for row in rows])
        if len(rows) < CSV_CHUNK:
            return
        after = (rows[-1].paidAt, rows[-1].key)


def _csv_lines(lines: Sequence[Sequence[object]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for line in lines:
        # A cell a spreadsheet would run as a formula (an invoiceId is the merchant's text)
        # is written with a leading apostrophe.
        writer.writerow([_inert(value) for value in line])
    return out.getvalue().encode()


def _inert(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
