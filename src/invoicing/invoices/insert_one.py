"""PostgreSQL: a lone create in one statement, for the batch of one that a process that is
not busy sends (``invoices.create_batch``).

Data-modifying CTEs record the signed request's replay key, then (only if it was new)
advance the owner's sequence, then insert the row with the owner's underpayment tolerance
read in the same statement; the answer says how far it got. One statement is atomic on its
own, so it runs without a transaction (one round trip), and the caller goes on where it
stopped in a transaction of its own.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Connection,
    Select,
    String,
    Table,
    bindparam,
    exists,
    func,
    literal,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import insert

from invoicing.auth.guard import Use
from invoicing.tables.auth import UsedRequestTimestamp
from invoicing.tables.invoices import INVOICE_COLUMN_NAMES, Invoice, InvoiceRow, OwnerSequence
from invoicing.tables.notifications import OwnerSettings

_INVOICES = cast(Table, Invoice.__table__)
_USED = cast(Table, UsedRequestTimestamp.__table__)
_SEQUENCES = cast(Table, OwnerSequence.__table__)


def insert_one(
    connection: Connection, invoice: InvoiceRow, generated: bool, use: Use | None
) -> tuple[bool, bool]:
    """(fresh, inserted). ``fresh`` False: ``use`` was recorded before (a replay) and nothing
    was written. ``inserted`` False: the row's (owner, chain, invoiceId) is taken; the replay
    key and a generated id's sequence step are written. When inserted, the invoice gets its
    generated invoiceId and its tolerance."""
    values = invoice.column_values()
    params = {f"v_{name}": values[name] for name in _bound_columns(generated)}
    if use is not None:
        params.update(used_owner=use[0], used_timestamp=use[1], used_expires=use[2])
    answer = connection.execute(_statement(generated, use is not None), params).one()
    if answer.invoice_id is None:
        return bool(answer.fresh), False
    invoice.invoice_id = str(answer.invoice_id)
    invoice.tolerance_bps = int(answer.tolerance_bps)
    return True, True


def _bound_columns(generated: bool) -> list[str]:
    """The columns whose values are parameters (the tolerance, and a generated invoiceId,
    are computed by the statement)."""
    computed = {"tolerance_bps", "invoice_id"} if generated else {"tolerance_bps"}
    return [name for name in INVOICE_COLUMN_NAMES if name not in computed]


@functools.cache
def _statement(generated: bool, signed: bool) -> Select[Any]:
    """The statement of each shape, built once with parameters for the values (``v_`` and the
    column name, ``used_``): building it and its cache key cost more than running it."""
    owner_key = bindparam("v_owner_key", type_=_INVOICES.c.owner_key.type)
    chain_id = bindparam("v_chain_id", type_=_INVOICES.c.chain_id.type)
    recorded = None
    if signed:
        used = (
            insert(_USED)
            .values(
                owner_key=bindparam("used_owner", type_=String),
                timestamp_ms=bindparam("used_timestamp", type_=BigInteger),
                expires_at=bindparam("used_expires", type_=BigInteger),
            )
            .on_conflict_do_nothing(index_elements=[_USED.c.owner_key, _USED.c.timestamp_ms])
            .returning(_USED.c.owner_key)
            .cte("used")
        )
        recorded = exists(select(used.c.owner_key))
    tolerance = func.coalesce(
        select(OwnerSettings.underpayment_tolerance_bps)
        .where(OwnerSettings.owner_key == owner_key)
        .scalar_subquery(),
        0,
    )
    generated_id: Any = None
    step = None
    if generated:
        counter = select(owner_key, chain_id, literal(2, BigInteger))
        if recorded is not None:
            counter = counter.where(recorded)
        step = (
            insert(_SEQUENCES)
            .from_select(["owner_key", "chain_id", "next_value"], counter)
            .on_conflict_do_update(
                index_elements=[_SEQUENCES.c.owner_key, _SEQUENCES.c.chain_id],
                set_={"next_value": _SEQUENCES.c.next_value + 1},
            )
            .returning(_SEQUENCES.c.next_value)
            .cte("step")
        )
        generated_id = func.cast(step.c.next_value - 1, String)
    bound = set(_bound_columns(generated))
    columns = [
        (
            bindparam(f"v_{name}", type_=_INVOICES.c[name].type)
            if name in bound
            else tolerance
            if name == "tolerance_bps"
            else generated_id
        ).label(name)
        for name in INVOICE_COLUMN_NAMES
    ]
    source = select(*columns)
    if step is not None:
        source = source.select_from(step)
    elif recorded is not None:
        source = source.where(recorded)
    inserted = (
        insert(_INVOICES)
        .from_select(list(INVOICE_COLUMN_NAMES), source)
        .on_conflict_do_nothing(index_elements=_conflict_columns())
        .returning(_INVOICES.c.invoice_id, _INVOICES.c.tolerance_bps)
        .cte("inserted")
    )
    one = select(literal(1).label("one")).subquery()
    return select(
        (recorded if recorded is not None else true()).label("fresh"),
        inserted.c.invoice_id,
        inserted.c.tolerance_bps,
    ).select_from(one.outerjoin(inserted, true()))


@functools.cache
def _conflict_columns() -> list[Any]:
    return [_INVOICES.c.owner_key, _INVOICES.c.chain_id, _INVOICES.c.invoice_id]
