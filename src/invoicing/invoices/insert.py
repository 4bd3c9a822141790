"""Writing new invoice rows in bulk, below ``create.py``'s batches: one statement inserts a
batch (the driver's own executemany on SQLite), an owner's generated invoiceIds come from one
sequence upsert per owner and chain, and a row is found by its (owner, chain, invoiceId).
New rows' ids are time-ordered (:func:`time_ordered_id`).

All of it runs on a plain Core connection inside the batch's transaction
(``Database.run_batch``); no ORM instance is built.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

from sqlalchemy import BigInteger, Connection, Dialect, Table, bindparam, select, update

from invoicing.db import upsert
from invoicing.tables.invoices import INVOICE_COLUMN_NAMES, Invoice, InvoiceRow, OwnerSequence
from invoicing.tables.notifications import OwnerSettings

_INVOICES = cast(Table, Invoice.__table__)


def insert_rows(connection: Connection, invoices: Sequence[InvoiceRow]) -> set[str]:
    """Insert the rows in one statement; returns the ids of those inserted, leaving out rows
    whose (owner, chain, invoiceId) is already taken (ON CONFLICT DO NOTHING)."""
    if connection.dialect.name == "sqlite":
        return _insert_sqlite(connection, invoices)
    rows = [invoice.column_values() for invoice in invoices]
    result = connection.execute(_insert_statement(connection.dialect.name), rows)
    return {str(row_id) for row_id in result.scalars()}


def _insert_sqlite(connection: Connection, invoices: Sequence[InvoiceRow]) -> set[str]:
    """SQLite: the driver's own executemany (its C loop binds the rows), with values
    converted by the columns' SQLAlchemy types as the Core statement would. The rows
    written tell whether all were inserted; only when some were not are the ids read back."""
    sql, columns = _sqlite_insert(connection.dialect)
    rows = [
        tuple(
            value if convert is None else convert(value)
            for value, convert in zip(invoice.values(), columns, strict=True)
        )
        for invoice in invoices
    ]
    written = connection.exec_driver_sql(sql, rows).rowcount
    ids = [invoice.id for invoice in invoices]
    if written == len(ids):
        return set(ids)
    found = connection.execute(select(_INVOICES.c.id).where(_INVOICES.c.id.in_(ids)))
    return {str(row_id) for row_id in found.scalars()}


@functools.cache
def _sqlite_insert(dialect: Dialect) -> tuple[str, list[Callable[[Any], Any] | None]]:
    """The INSERT text in column order and each column's bind conversion."""
    names = INVOICE_COLUMN_NAMES
    sql = (
        f"INSERT INTO {_INVOICES.name} ({', '.join(names)}) "
        f"VALUES ({', '.join('?' for _ in names)}) "
        "ON CONFLICT (owner_key, chain_id, invoice_id) DO NOTHING"
    )
    return sql, [_INVOICES.c[name].type.bind_processor(dialect) for name in names]


@functools.cache
def _insert_statement(dialect: str) -> Any:
    """One compiled statement for every batch size (executed with a list of rows)."""
    return (
        upsert(dialect, _INVOICES)
        .on_conflict_do_nothing(
            index_elements=[_INVOICES.c.owner_key, _INVOICES.c.chain_id, _INVOICES.c.invoice_id]
        )
        .returning(_INVOICES.c.id)
    )


def find_by_invoice_id(connection: Connection, invoice: InvoiceRow) -> InvoiceRow | None:
    return find_by_key(connection, (invoice.owner_key, invoice.chain_id, invoice.invoice_id))


def identical_row(
    connection: Connection, key: tuple[str, int, str], request_hash: str
) -> InvoiceRow | None:
    """The invoice an identical earlier create made (same key and request), or None."""
    found = find_by_key(connection, key)
    if found is None or found.request_hash != request_hash or found.deleted_at is not None:
        return None
    return found


def find_by_key(connection: Connection, key: tuple[str, int, str]) -> InvoiceRow | None:
    """The invoice of (lowercased owner, chain id, invoiceId), or None."""
    owner_key, chain_id, invoice_id = key
    found = connection.execute(
        select(_INVOICES).where(
            _INVOICES.c.owner_key == owner_key,
            _INVOICES.c.chain_id == chain_id,
            _INVOICES.c.invoice_id == invoice_id,
        )
    ).first()
    return None if found is None else InvoiceRow(*found)


def advance_sequence(
    connection: Connection, owner_key: str, chain_id: int, count: int
) -> tuple[int, int]:
    """Take the owner's next ``count`` sequence numbers; returns the last one, and the
    owner's underpayment tolerance (basis points, 0 if none) read by the same statement.

    One upsert both creates the counter and advances it; the row lock it takes serializes
    concurrent creators for the same owner and chain (on every API process)."""
    advanced = connection.execute(
        _advance_statement(connection.dialect.name),
        {"owner_key": owner_key, "chain_id": chain_id, "count": count},
    ).one()
    return int(advanced[0]) - 1, int(advanced[1] or 0)


@functools.cache
def _advance_statement(dialect: str) -> Any:
    """The sequence upsert, built once: building it per batch cost as much as running it."""
    sequences = cast(Table, OwnerSequence.__table__)
    count = bindparam("count", type_=BigInteger)
    tolerance = (
        select(OwnerSettings.underpayment_tolerance_bps)
        .where(OwnerSettings.owner_key == bindparam("owner_key"))
        .scalar_subquery()
    )
    return (
        upsert(dialect, sequences)
        .values(
            owner_key=bindparam("owner_key"), chain_id=bindparam("chain_id"), next_value=count + 1
        )
        .on_conflict_do_update(
            index_elements=[sequences.c.owner_key, sequences.c.chain_id],
            set_={"next_value": sequences.c.next_value + count},
        )
        .returning(sequences.c.next_value, tolerance)
    )


def skip_taken(
    connection: Connection, invoice: InvoiceRow, last_taken: dict[tuple[str, int], int]
) -> None:
    """Move the invoice's generated id past every taken one (ids the owner chose, or given
    to others of this batch); advance the stored counter if the id went beyond it."""
    value = int(invoice.invoice_id)
    while find_by_invoice_id(connection, invoice) is not None:
        value += 1
        invoice.invoice_id = str(value)
    key = (invoice.owner_key, invoice.chain_id)
    if value > last_taken[key]:
        last_taken[key] = value
        sequences = cast(Table, OwnerSequence.__table__)
        connection.execute(
            update(sequences)
            .where(sequences.c.owner_key == key[0], sequences.c.chain_id == key[1])
            .values(next_value=value + 1)
        )


def time_ordered_id(now_ms: int) -> str:
    """A version 7 UUID (RFC 9562): the milliseconds come first, so a new row's key lands at
    the end of the primary-key index instead of on a random page of it."""
    random = int.from_bytes(os.urandom(10), "big")
    value = (
        (now_ms & (1 << 48) - 1) << 80
        | 0x7 << 76
        | (random >> 68) << 64
        | 0b10 << 62
        | random & (1 << 62) - 1
    )
    return str(uuid.UUID(int=value))
