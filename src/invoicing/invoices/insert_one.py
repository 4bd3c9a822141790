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

from sqlalchemy import BigInteger, Connection, String, Table, exists, func, literal, select, true
from sqlalchemy.dialects.postgresql import insert

from invoicing.auth.guard import Use
from invoicing.auth.models import UsedRequestTimestamp
from invoicing.invoices.models import INVOICE_COLUMN_NAMES, Invoice, InvoiceRow, OwnerSequence
from invoicing.notifications.models import OwnerSettings

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
    owner_key, chain_id = invoice.owner_key, invoice.chain_id
    recorded = None
    if use is not None:
        used = (
            insert(_USED)
            .values(owner_key=use[0], timestamp_ms=use[1], expires_at=use[2])
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
        counter = select(
            literal(owner_key, String), literal(chain_id, BigInteger), literal(2, BigInteger)
        )
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
    columns = [
        (
            tolerance
            if name == "tolerance_bps"
            else generated_id
            if name == "invoice_id" and generated
            else literal(values[name], _INVOICES.c[name].type)
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
    answer = connection.execute(
        select(
            (recorded if recorded is not None else true()).label("fresh"),
            inserted.c.invoice_id,
            inserted.c.tolerance_bps,
        ).select_from(one.outerjoin(inserted, true()))
    ).one()
    if answer.invoice_id is None:
        return bool(answer.fresh), False
    invoice.invoice_id = str(answer.invoice_id)
    invoice.tolerance_bps = int(answer.tolerance_bps)
    return True, True


@functools.cache
def _conflict_columns() -> list[Any]:
    return [_INVOICES.c.owner_key, _INVOICES.c.chain_id, _INVOICES.c.invoice_id]
