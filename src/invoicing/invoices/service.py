"""Invoice use cases: find, list, delete (creating is in ``invoices.create``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select

from invoicing.addresses import normalize_address
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal
from invoicing.errors import NotFound
from invoicing.invoices.coverage import last_checked_of, shard_records
from invoicing.invoices.lifecycle import InvoiceStatus, apply_step, on_delete
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice, InvoiceRow


async def invoice_at(db: Database, payment_address: str) -> Invoice:
    """The invoice at that escrow (checksummed), whoever owns it, deleted ones included: the
    one lookup of an invoice by its escrow for the payment page and the payment methods.
    404 when there is none."""
    async with db.sessions() as session:
        invoice = await session.scalar(
            select(Invoice).where(Invoice.payment_address == payment_address)
        )
    if invoice is None:
        raise NotFound("no invoice with this paymentAddress")
    return invoice


async def find_by_payment_address(db: Database, owner_key: str, payment_address: str) -> InvoiceRow:
    """The owner's invoice at that escrow; 404 also when it belongs to another owner.

    Concurrent lookups of this process share one query (this is the status lookup's hot
    path); a lookup always waits for a query that starts after it.
    """
    address = _stored_form(payment_address)
    invoice = None if address is None else await _FINDER.of(db).submit(address)
    if invoice is None or invoice.owner_key != owner_key:
        raise NotFound("no invoice with this paymentAddress for this owner")
    return invoice


def _stored_form(payment_address: str) -> str | None:
    """Escrow addresses are stored checksummed, so an exact match uses the unique index."""
    try:
        return normalize_address(payment_address)
    except ValueError:
        return None


# Concurrent lookups by payment address of this process share one query.
_FINDER: ProcessLocal[Coalescer[str, InvoiceRow | None]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_find_batch, db), max_batch=500)
)


async def _find_batch(
    db: Database, addresses: Sequence[str]
) -> list[InvoiceRow | None | Exception]:
    """The invoices at a batch of escrow addresses (one query; ``None`` where there is none).
    Rows of the table, not ORM objects: nothing to track for a read. Callers share them, so
    they must not change them."""
    wanted = {"addresses": list(set(addresses))}
    rows = await db.read_statement(
        lambda connection: connection.execute(_find_statement(), wanted).all()
    )
    found = {invoice.payment_address: invoice for invoice in map(_as_row, rows)}
    return [found.get(address) for address in addresses]


_INVOICES = cast(Table, Invoice.__table__)


@functools.cache
def _find_statement() -> Any:
    """The batch lookup, built once: building the statement and its cache key for every
    batch cost about as much as the rest of the lookup's Python."""
    return select(_INVOICES).where(
        _INVOICES.c.payment_address.in_(bindparam("addresses", expanding=True))
    )


def _as_row(row: Any) -> InvoiceRow:
    return InvoiceRow(*row)


@dataclass(frozen=True)
class InvoiceFilter:
    owner_key: str
    chain_id: int | None = None
    status: str | None = None
    paid: bool | None = None
    token_address: str | None = None
    invoice_id: str | None = None
    date_from: int | None = None
    date_to: int | None = None
    page: int = 1
    limit: int = 20


async def list_invoices(db: Database, query: InvoiceFilter) -> tuple[list[Invoice], int]:
    conditions: list[Any] = [Invoice.owner_key == query.owner_key]
    if query.status == InvoiceStatus.CANCELLED:
        conditions.append(Invoice.status == InvoiceStatus.CANCELLED)
    else:
        conditions.append(Invoice.deleted_at.is_(None))
        if query.status is not None:
            conditions.append(Invoice.status == query.status)
    if query.chain_id is not None:
        conditions.append(Invoice.chain_id == query.chain_id)
    if query.paid is not None:
        conditions.append(Invoice.paid.is_(query.paid))
    if query.token_address is not None:
        conditions.append(func.lower(Invoice.token_address) == query.token_address.lower())
    if query.invoice_id is not None:
        conditions.append(Invoice.invoice_id == query.invoice_id)
    if query.date_from is not None:
        conditions.append(Invoice.created_at >= query.date_from)
    if query.date_to is not None:
        conditions.append(Invoice.created_at <= query.date_to)
    async with db.sessions() as session:
        total = await session.scalar(select(func.count()).select_from(Invoice).where(*conditions))
        rows = await session.scalars(
            select(Invoice)
            .where(*conditions)
            .order_by(Invoice.created_at.desc(), Invoice.id)
            .offset((query.page - 1) * query.limit)
            .limit(query.limit)
        )
        return list(rows), int(total or 0)


async def delete_invoice(
    db: Database, owner_key: str, chain_id: int, invoice_id: str, now_ms: int, settings: Settings
) -> Invoice:
    """Soft delete (``lifecycle.on_delete``): pending/expired → cancelled (with its
    ``invoice.cancelled`` event); paid/completed keep their status and are still withdrawn to
    the owner. The monitor stops reading the escrow; funds reaching it are still swept.

    Idempotent: deleting an invoice that is already deleted changes nothing and returns it,
    so a client retrying after a timeout gets the same answer, not 404."""
    async with db.transaction() as session:
        invoice = await session.scalar(
            select(Invoice)
            .where(
                Invoice.owner_key == owner_key,
                Invoice.chain_id == chain_id,
                Invoice.invoice_id == invoice_id,
            )
            .with_for_update()
        )
        if invoice is None:
            raise NotFound("no such invoice for this owner and chain")
        if invoice.deleted_at is None:
            # Its shard's passes stop speaking for it: it keeps the last check they made.
            records = await shard_records(session, [invoice])
            invoice.last_checked_at = last_checked_of(invoice, records)
            events = apply_step(invoice, on_delete(invoice), now_ms)
            await record_events(session, settings, now_ms, [Occurrence(invoice, events)])
        return invoice
