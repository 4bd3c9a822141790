"""The escrow export: every escrow an owner ever had on a chain, with the salt to sweep it.

One JSON object a line (NDJSON), oldest first, cancelled and deleted invoices included::

    {"paymentAddress","salt","tokenAddress","invoiceId","status","chainId","factory"}

``factory`` is the factory that made the escrow and sweeps it: the chain's current one, or a
previous version's for an escrow made before an upgrade (``chain.versions``).

The file is what ``invoicing recover`` (``invoicing.recovery``) and ``examples/recover.mjs``
(docs/operations/recovery.md) read to sweep the escrows through the factory without this
service. Rows are read in
keyset-paginated chunks, so an owner with millions of invoices is never held in memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import select, tuple_

from invoicing.chain.versions import escrow_factory
from invoicing.db import Database
from invoicing.tables.invoices import Invoice

EXPORT_CHUNK_ROWS = 1000

_COLUMNS = (
    Invoice.created_at,
    Invoice.id,
    Invoice.payment_address,
    Invoice.salt,
    Invoice.token_address,
    Invoice.invoice_id,
    Invoice.status,
    Invoice.chain_id,
    Invoice.owner_address,
)


def escrow_line(row: Any, factories: Sequence[str]) -> str:
    """One export line (with its newline) from a row of ``_COLUMNS``; ``factories``: the
    chain's, the current one first (none: the chain is not configured here, and the line
    names no factory)."""
    entry: dict[str, Any] = {
        "paymentAddress": row.payment_address,
        "salt": row.salt,
        "tokenAddress": row.token_address,
        "invoiceId": row.invoice_id,
        "status": row.status,
        "chainId": row.chain_id,
    }
    if factories:
        salt = bytes.fromhex(row.salt[2:])
        made_by = escrow_factory(factories, row.owner_address, salt, row.payment_address)
        entry["factory"] = made_by
    return json.dumps(entry, separators=(",", ":")) + "\n"


async def export_escrows(
    db: Database,
    owner_key: str,
    chain_id: int,
    factories: Sequence[str],
    chunk_rows: int = EXPORT_CHUNK_ROWS,
) -> AsyncIterator[str]:
    """The owner's escrows on ``chain_id`` as NDJSON lines, oldest first (created_at, id);
    ``factories``: the chain's (``ChainConfig.factories``).

    Each chunk is one short read session; the next starts after the last (created_at, id)
    seen, so rows added meanwhile are included and none is read twice."""
    after: tuple[int, str] | None = None
    while True:
        query = select(*_COLUMNS).where(
            Invoice.owner_key == owner_key, Invoice.chain_id == chain_id
        )
        if after is not None:
            query = query.where(tuple_(Invoice.created_at, Invoice.id) > tuple_(*after))
        query = query.order_by(Invoice.created_at, Invoice.id).limit(chunk_rows)
        async with db.sessions() as session:
            rows = (await session.execute(query)).all()
        for row in rows:
            yield escrow_line(row, factories)
        if len(rows) < chunk_rows:
            return
        after = (rows[-1].created_at, rows[-1].id)
