"""What a monitor worker reads from the database when it takes a shard on (``monitor.changes``
loads its watched set with it): a chain's pending watched invoices, grouped per shard and
asset, as few Python objects as the database can hand over; and the full rows a pass
decides on.

A pending invoice that nothing has reached (balance 0, a non-zero amount due, readable) is
*quiet*: a zero reading changes nothing before its expiry, which is the answer for almost
every invoice of almost every pass. The scan hands over, per shard and asset, the quiet
invoices' escrow addresses and expiries as two arrays, and the others' addresses as a third
(``loud``: a reading of theirs is always decided on the full row). A pass then needs a full
row only for an invoice whose reading is not zero, is unreadable, or falls after its expiry,
or that is loud (``rows_at``).

Both databases answer from one covering index (``ix_invoices_watched``: chain, status, shard,
asset, then the columns the scan reads), without touching the table: on PostgreSQL one
index-only scan per shard aggregated into arrays (``LATERAL`` over the shards), on SQLite a
``GROUP BY`` over the index with ``group_concat``. A load asks for ``SHARDS_PER_QUERY``
shards at a time and the next query runs while the groups of the previous one are read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Integer, Table, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY

from invoicing.addresses import address_bytes, checksum_encode
from invoicing.db import Database
from invoicing.tables.invoices import Invoice

INVOICES = cast(Table, Invoice.__table__)
# The full row of a watched invoice (``Batches``' rows, ``passes._store``): the first
# columns are the fields of ``InvoiceState``.
PASS_COLUMNS = (
    INVOICES.c.id,
    INVOICES.c.payment_address,
    INVOICES.c.token_address,
    INVOICES.c.status,
    INVOICES.c.balance_raw,
    INVOICES.c.required_raw,
    INVOICES.c.expires_at,
    INVOICES.c.tolerance_bps,
    INVOICES.c.last_checked_at,
    INVOICES.c.unreadable,
    INVOICES.c.shard,
)
# The expiry given to a loud invoice: earlier than any clock, so its reading is always
# decided on its row.
LOUD = -1
SHARDS_PER_QUERY = 4
# Addresses per query of ``rows_at``.
ROWS_CHUNK = 5000

QUIET = "balance_raw = '0' AND required_raw <> '0' AND NOT unreadable"
_PG_GROUPS = text(
    f"""
    SELECT s.shard, g.token_address, g.quiet, g.expires, g.loud
    FROM unnest(:shards) AS s(shard) CROSS JOIN LATERAL (
        SELECT token_address,
            array_agg(payment_address) FILTER (WHERE quiet) AS quiet,
            array_agg(expires_at) FILTER (WHERE quiet) AS expires,
            array_agg(payment_address) FILTER (WHERE NOT quiet) AS loud
        FROM (
            SELECT token_address, payment_address, expires_at, {QUIET} AS quiet
            FROM invoices
            WHERE chain_id = :chain_id AND status = :status AND shard = s.shard AND watch
        ) AS watched
        GROUP BY token_address
    ) AS g
    """
).bindparams(bindparam("shards", type_=ARRAY(Integer)))
# group_concat steps through a group's rows once for all its aggregates, so the quiet
# addresses and expiries come in the same order.
_SQLITE_GROUPS = text(
    f"""
    SELECT shard, token_address,
        group_concat(CASE WHEN quiet THEN payment_address END, ','),
        group_concat(CASE WHEN quiet THEN expires_at END, ','),
        group_concat(CASE WHEN quiet THEN NULL ELSE payment_address END, ',')
    FROM (
        SELECT shard, token_address, payment_address, expires_at, {QUIET} AS quiet
        FROM invoices
        WHERE chain_id = :chain_id AND status = :status AND shard IN :shards AND watch
    ) AS watched
    GROUP BY shard, token_address
    """
).bindparams(bindparam("shards", expanding=True))


@dataclass(frozen=True)
class Group:
    """Escrows of one asset (``token``: None for the native coin) to read, and per escrow the
    expiry before which a zero reading changes nothing (``LOUD``: none)."""

    shard: int
    token: str | None
    addresses: list[str]
    expires: list[int]


async def pending_groups(
    db: Database, chain_id: int, status: str, shards: Sequence[int]
) -> AsyncIterator[list[Group]]:
    """The groups of ``shards``, ``SHARDS_PER_QUERY`` shards a step; the next step's query
    runs while the caller handles one."""
    step = SHARDS_PER_QUERY
    chunks = [list(shards[i : i + step]) for i in range(0, len(shards), step)]
    ahead: asyncio.Future[list[Group]] | None = None
    try:
        for index, chunk in enumerate(chunks):
            if ahead is None:
                ahead = asyncio.ensure_future(_groups(db, chain_id, status, chunk))
            groups = await ahead
            ahead = None
            if index + 1 < len(chunks):
                ahead = asyncio.ensure_future(_groups(db, chain_id, status, chunks[index + 1]))
            yield groups
    finally:
        if ahead is not None:
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)


async def _groups(db: Database, chain_id: int, status: str, shards: list[int]) -> list[Group]:
    values = {"chain_id": chain_id, "status": status, "shards": shards}
    async with db.sessions() as session:
        if db.dialect == "postgresql":
            result = await session.execute(_PG_GROUPS, values)
            return [_group(*row) for row in result]
        result = await session.execute(_SQLITE_GROUPS, values)
        return [
            _group(
                shard,
                token,
                quiet.split(",") if quiet else None,
                [int(e) for e in expires.split(",")] if expires else None,
                loud.split(",") if loud else None,
            )
            for shard, token, quiet, expires, loud in result
        ]


def _group(
    shard: int,
    token: str | None,
    quiet: list[str] | None,
    expires: list[int] | None,
    loud: list[str] | None,
) -> Group:
    addresses = quiet or []
    expiries = list(expires or [])
    if loud:
        addresses = addresses + loud
        expiries += [LOUD] * len(loud)
    return Group(shard, token, addresses, expiries)


async def rows_at(db: Database, chain_id: int, status: str, addresses: Sequence[str]) -> list[Any]:
    """The full rows (``PASS_COLUMNS``) of the watched invoices of ``status`` at
    ``addresses`` (an invoice that moved on or stopped being watched meanwhile is left
    out). An address may be given in lower case (``monitor.watched``): it is looked up as
    given and checksummed."""
    rows: list[Any] = []
    async with db.sessions() as session:
        for start in range(0, len(addresses), ROWS_CHUNK):
            chunk = addresses[start : start + ROWS_CHUNK]
            forms = {*chunk, *(checksum_encode(address_bytes(a)) for a in chunk)}
            result = await session.execute(
                select(*PASS_COLUMNS).where(
                    INVOICES.c.payment_address.in_(sorted(forms)),
                    INVOICES.c.chain_id == chain_id,
                    INVOICES.c.status == status,
                    text("watch"),
                )
            )
            rows.extend(result)
    return rows
