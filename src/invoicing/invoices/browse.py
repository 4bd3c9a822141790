"""An owner's invoices as the dashboard browses them: filtered, searched, keyset-paged and
exported, and the overview's figures (docs/dashboard.md).

Paging is by keyset on (``created_at``, ``id``) newest first, through the
``ix_invoices_owner_created`` index: page 5,000 of 100,000 invoices costs what page 1 costs
(no OFFSET). The CSV export walks the same filtered list in chunks of the same statement,
so it holds exactly the rows the list shows, and never holds them all in memory.
"""

from __future__ import annotations

import base64
import binascii
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import and_, exists, func, or_, select, tuple_

from invoicing.addresses import checksum_encode
from invoicing.db import Database
from invoicing.invoices.fiat import value_in
from invoicing.invoices.lifecycle import InvoiceEvent, InvoiceStatus
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event, EventStatus, WebhookEvent
from invoicing.tables.rates import PaidRate
from invoicing.tables.records import PaymentRecord

DAY_MS = 86_400_000
NATIVE = "native"
EXPORT_CHUNK = 5000


@dataclass(frozen=True)
class BrowseFilter:
    """What the list shows: every field narrows it (None: no narrowing)."""

    owner_key: str
    status: str | None = None
    chain_id: int | None = None
    token: str | None = None  # a token address, or "native"
    date_from: int | None = None  # created at or after (unix ms)
    date_to: int | None = None  # created before (unix ms)
    # An invoiceId, an address (0x + 40 hex: the paymentAddress or a payer of record) or a
    # transaction hash of a payment of record (0x + 64 hex).
    search: str | None = None
    webhook_failing: bool = False


def encode_cursor(invoice: Invoice) -> str:
    raw = f"{invoice.created_at}:{invoice.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str] | None:
    """(created_at, id) of a cursor; None for one that is not ours."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, invoice_pk = text.partition(":")
        if not created.isdigit() or not invoice_pk or len(invoice_pk) > 36:
            return None
        return int(created), invoice_pk
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _failing_webhook() -> Any:
    return exists(
        select(WebhookEvent.id).where(
            WebhookEvent.invoice_pk == Invoice.id,
            or_(
                WebhookEvent.status == EventStatus.FAILED,
                and_(WebhookEvent.status == EventStatus.PENDING, WebhookEvent.attempts > 0),
            ),
        )
    )


def _conditions(query: BrowseFilter) -> list[Any]:
    conditions: list[Any] = [Invoice.owner_key == query.owner_key]
    if query.status is not None:
        conditions.append(Invoice.status == query.status)
    if query.chain_id is not None:
        conditions.append(Invoice.chain_id == query.chain_id)
    if query.token == NATIVE:
        conditions.append(Invoice.token_address.is_(None))
    elif query.token is not None:
        conditions.append(func.lower(Invoice.token_address) == query.token.lower())
    if query.date_from is not None:
        conditions.append(Invoice.created_at >= query.date_from)
    if query.date_to is not None:
        conditions.append(Invoice.created_at < query.date_to)
    if query.search:
        term = query.search.strip()
        conditions.append(_searched(term))
    if query.webhook_failing:
        conditions.append(_failing_webhook())
    return conditions


def _searched(term: str) -> Any:
    """Invoices that ``term`` names: by invoiceId, escrow or payer address, or payment
    transaction hash (``invoices.payments``; the records' indexes find them)."""
    digits = term[2:]
    is_hex = term.lower().startswith("0x") and all(c in "0123456789abcdefABCDEF" for c in digits)
    if is_hex and len(digits) == 40:
        payer = checksum_encode(bytes.fromhex(digits))
        paid_by = select(PaymentRecord.invoice_id).where(PaymentRecord.from_address == payer)
        return or_(func.lower(Invoice.payment_address) == term.lower(), Invoice.id.in_(paid_by))
    if is_hex and len(digits) == 64:
        paid_in = select(PaymentRecord.invoice_id).where(PaymentRecord.tx_hash == term.lower())
        return Invoice.id.in_(paid_in)
    return Invoice.invoice_id == term


def _page_statement(query: BrowseFilter, after: tuple[int, str] | None, limit: int) -> Any:
    statement = select(Invoice).where(*_conditions(query), *_after(after))
    return statement.order_by(Invoice.created_at.desc(), Invoice.id.desc()).limit(limit)


def _after(after: tuple[int, str] | None) -> list[Any]:
    """Rows after the cursor, newest first. The plain bound on ``created_at`` lets the
    database start its index range scan there (the row comparison alone it may not)."""
    if after is None:
        return []
    created, invoice_pk = after
    return [
        Invoice.created_at <= created,
        tuple_(Invoice.created_at, Invoice.id) < tuple_(created, invoice_pk),
    ]


@dataclass(frozen=True)
class InvoicePage:
    items: list[Invoice]
    next_cursor: str | None


async def browse_invoices(
    db: Database, query: BrowseFilter, cursor: str | None, limit: int
) -> InvoicePage:
    """One page of the filtered list, newest first, after ``cursor`` (None: the first)."""
    after = decode_cursor(cursor) if cursor else None
    async with db.sessions() as session:
        rows = list(await session.scalars(_page_statement(query, after, limit + 1)))
    more = len(rows) > limit
    items = rows[:limit]
    return InvoicePage(items, encode_cursor(items[-1]) if more and items else None)


async def count_invoices(db: Database, query: BrowseFilter, up_to: int) -> int:
    """How many invoices the filter matches, counted up to ``up_to`` (more: ``up_to``), so
    the count costs no more than reading that many index entries."""
    async with db.sessions() as session:
        matching = select(Invoice.id).where(*_conditions(query)).limit(up_to).subquery()
        total = await session.scalar(select(func.count()).select_from(matching))
    return int(total or 0)


async def export_invoices(db: Database, query: BrowseFilter) -> AsyncIterator[Sequence[Any]]:
    """Every invoice of the filtered list, newest first, in chunks (rows of Core columns)."""
    columns = (
        Invoice.id,
        Invoice.invoice_id,
        Invoice.chain_id,
        Invoice.payment_address,
        Invoice.token_address,
        Invoice.amount,
        Invoice.decimals,
        Invoice.required_raw,
        Invoice.balance_raw,
        Invoice.status,
        Invoice.created_at,
        Invoice.expires_at,
        Invoice.paid_at,
        Invoice.withdrawn_at,
        Invoice.description,
        Invoice.currency,
        Invoice.fiat_amount,
        PaidRate.currency.label("paid_rate_currency"),
        PaidRate.rate.label("paid_rate"),
    )
    after: tuple[int, str] | None = None
    while True:
        statement = (
            select(*columns)
            .outerjoin(PaidRate, PaidRate.invoice_pk == Invoice.id)
            .where(*_conditions(query), *_after(after))
        )
        statement = statement.order_by(Invoice.created_at.desc(), Invoice.id.desc()).limit(
            EXPORT_CHUNK
        )
        # Core rows on a plain connection: the ORM's per-row work would halve the rate.
        async with db.engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        if not rows:
            return
        yield rows
        if len(rows) < EXPORT_CHUNK:
            return
        last = rows[-1]
        after = (last.created_at, last.id)


@dataclass
class Overview:
    """The overview page's figures for one owner."""

    # (chain_id, token address or None) → raw amount paid per day, oldest day first.
    volume: dict[tuple[int, str | None], list[int]] = field(default_factory=dict)
    decimals: dict[tuple[int, str | None], int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    attention: list[tuple[Invoice, list[str]]] = field(default_factory=list)
    first_day_ms: int = 0
    # In the reporting currency, when one was asked for (``invoices.fiat``): the value paid
    # per day, oldest first, and how many paid invoices have no value in it.
    currency: str | None = None
    fiat: list[Decimal] = field(default_factory=list)
    unvalued: int = 0


ATTENTION_EVENTS = (
    InvoiceEvent.PARTIALLY_PAID,
    InvoiceEvent.OVERPAID,
    InvoiceEvent.LATE_PAID,
)
ATTENTION_LABELS = {
    InvoiceEvent.PARTIALLY_PAID: "partially paid",
    InvoiceEvent.OVERPAID: "overpaid",
    InvoiceEvent.LATE_PAID: "paid late",
}


async def overview(
    db: Database, owner_key: str, now_ms: int, days: int = 30, currency: str | None = None
) -> Overview:
    """Paid volume per token and day over ``days`` days (and in ``currency``, if given),
    counts by status, and the invoices that need attention: partially paid, overpaid or paid
    late in that time (by their events), pending past their expiry, or with a failing
    webhook."""
    first_day = (now_ms // DAY_MS - days + 1) * DAY_MS
    found = Overview(first_day_ms=first_day, currency=currency, fiat=[Decimal(0)] * days)
    async with db.sessions() as session:
        paid = await session.execute(
            select(
                Invoice.chain_id,
                Invoice.token_address,
                Invoice.decimals,
                Invoice.paid_at,
                Invoice.required_raw,
                Invoice.currency,
                Invoice.fiat_amount,
                PaidRate.currency.label("paid_currency"),
                PaidRate.rate.label("paid_rate"),
            )
            .outerjoin(PaidRate, PaidRate.invoice_pk == Invoice.id)
            .where(Invoice.owner_key == owner_key, Invoice.paid_at >= first_day)
        )
        for row in paid:
            if row.paid_at is None:
                continue
            key = (row.chain_id, row.token_address.lower() if row.token_address else None)
            series = found.volume.setdefault(key, [0] * days)
            found.decimals[key] = row.decimals
            day = min((row.paid_at - first_day) // DAY_MS, days - 1)
            series[day] += int(row.required_raw)
            _add_fiat(found, row, day)
        counts = await session.execute(
            select(Invoice.status, func.count())
            .where(Invoice.owner_key == owner_key)
            .group_by(Invoice.status)
        )
        found.counts = {status: 0 for status in InvoiceStatus} | {s: int(n) for s, n in counts}
        found.attention = await _attention(session, owner_key, first_day, now_ms)
    return found


def _add_fiat(found: Overview, row: Any, day: int) -> None:
    if found.currency is None:
        return
    paid = None
    if row.paid_currency is not None:
        paid = PaidRate(currency=row.paid_currency, rate=row.paid_rate)
    value = value_in(row, paid, found.currency)
    if value is None:
        found.unvalued += 1
    else:
        found.fiat[day] += value.amount


async def _attention(
    session: Any, owner_key: str, since_ms: int, now_ms: int, limit: int = 20
) -> list[tuple[Invoice, list[str]]]:
    reasons: dict[str, list[str]] = defaultdict(list)
    events = await session.execute(
        select(Event.invoice_pk, Event.type)
        .where(
            Event.owner_key == owner_key,
            Event.type.in_([str(e) for e in ATTENTION_EVENTS]),
            Event.created_at >= since_ms,
        )
        .order_by(Event.seq.desc())
        .limit(200)
    )
    for invoice_pk, event_type in events:
        label = ATTENTION_LABELS[InvoiceEvent(event_type)]
        if invoice_pk and label not in reasons[invoice_pk]:
            reasons[invoice_pk].append(label)
    late = await session.scalars(
        select(Invoice.id)
        .where(
            Invoice.owner_key == owner_key,
            Invoice.status == InvoiceStatus.PENDING,
            Invoice.expires_at < now_ms,
        )
        .limit(limit)
    )
    for invoice_pk in late:
        reasons[invoice_pk].append("late")
    failing = await session.scalars(
        select(Invoice.id)
        .where(Invoice.owner_key == owner_key, Invoice.created_at >= since_ms, _failing_webhook())
        .limit(limit)
    )
    for invoice_pk in failing:
        reasons[invoice_pk].append("webhook failing")
    if not reasons:
        return []
    rows = await session.scalars(
        select(Invoice)
        .where(Invoice.owner_key == owner_key, Invoice.id.in_(list(reasons)))
        .order_by(Invoice.created_at.desc())
        .limit(limit)
    )
    return [(row, reasons[row.id]) for row in rows]
