"""What a worker's watched set (``monitor.watched``) reads from the database: each leased
shard once, then only the invoices that changed.

Every write of an invoice that can change what a pending pass reads of it (created, its
status, whether it is watched, its balance, amount due, expiry or unreadable flag) gives the
row a new ``change_seq``, in the same transaction, by a trigger (migration
``0060_invoice_change_seq``), so no code path can forget it:

- on PostgreSQL the writing transaction's id (``pg_current_xact_id()``). Ids are handed out
  when transactions start, not when they commit, so a reader's *cursor* is the oldest id
  still running when it read (``pg_snapshot_xmin``): every change below it had committed
  and was seen, and the next read starts there (a change read twice is applied twice, the
  same way);
- on SQLite one more than the chain's highest (writers take turns, so changes commit in
  their order), and the cursor is one more than the highest seen.

A refresh reads the rows changed since the cursor (``ix_invoices_changes``) as they are now,
and holds or drops each one's escrow: a pending watched invoice is held with its expiry (or
``LOUD``), any other is dropped. Order does not matter: each row is applied as it stands.
A shard taken on (a new lease, a worker's start) is loaded whole, once, with the pass's
index-only scan (``monitor.scan``); a shard no longer leased is forgotten, so a shard held
again is loaded again (the changes meanwhile were not read for it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database, ProcessLocal
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.monitor.scan import LOUD, QUIET, pending_groups
from invoicing.monitor.watched import AssetSet, ShardSet

_PG_CURSOR = text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
_SQLITE_CURSOR = text(
    "SELECT coalesce(max(change_seq), 0) + 1 FROM invoices WHERE chain_id = :chain_id"
)
_CHANGES = text(
    f"""
    SELECT shard, token_address, payment_address,
        CASE WHEN {QUIET} THEN expires_at ELSE {LOUD} END AS expiry,
        watch AND status = '{InvoiceStatus.PENDING.value}' AS pending,
        change_seq
    FROM invoices
    WHERE chain_id = :chain_id AND change_seq >= :cursor
    """
)


@dataclass
class Watched:
    """One chain's pending watched escrows of the shards this worker holds."""

    chain_id: int
    shards: dict[int, ShardSet] = field(default_factory=dict)
    # The lowest change number not surely read (None: nothing held).
    cursor: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Shards loaded whole, rows applied from changes, and the seconds of the last loads.
    loads: int = 0
    applied: int = 0
    load_s: float = 0.0


# This process's watched sets, by chain id.
_WATCHED: ProcessLocal[dict[int, Watched]] = ProcessLocal(lambda _db: {})


def watched_of(db: Database, chain_id: int) -> Watched:
    """This process's watched set of ``chain_id`` on ``db``."""
    chains = _WATCHED.of(db)
    if chain_id not in chains:
        chains[chain_id] = Watched(chain_id)
    return chains[chain_id]


async def refresh(
    db: Database, watched: Watched, shards: Sequence[int], held: Sequence[int] | None = None
) -> None:
    """Bring ``shards`` of ``watched`` up to date (the caller holds its lock): the changes
    since the last refresh applied, the shards not held yet loaded. ``held``: every shard
    this worker leases (the others are forgotten); None keeps what is held."""
    if held is not None:
        for shard in set(watched.shards) - set(held):
            del watched.shards[shard]
        if not watched.shards:
            watched.cursor = None
    if watched.cursor is not None:
        await _apply_changes(db, watched)
    missing = [shard for shard in shards if shard not in watched.shards]
    if missing:
        await _load(db, watched, missing)


async def _apply_changes(db: Database, watched: Watched) -> None:
    async with db.sessions() as session:
        cursor = await _cursor(session, db.dialect, watched.chain_id)
        rows = await session.execute(
            _CHANGES, {"chain_id": watched.chain_id, "cursor": watched.cursor}
        )
        highest = None
        for shard, token, address, expiry, pending, seq in rows:
            highest = seq if highest is None else max(highest, seq)
            held = watched.shards.get(shard)
            if held is None:
                continue
            watched.applied += 1
            if pending:
                held.put(token, address, expiry)
            else:
                held.drop(token, address)
    if db.dialect != "postgresql":
        # SQLite: the cursor read first is one more than the highest then; rows read after
        # it may be newer still.
        cursor = max(cursor, (highest or 0) + 1)
    watched.cursor = max(watched.cursor or 0, cursor)


async def _load(db: Database, watched: Watched, shards: list[int]) -> None:
    """Load ``shards`` whole; the cursor moves back to before the load (what changed during
    it is read again at the next refresh)."""
    started = time.perf_counter()
    async with db.sessions() as session:
        cursor = await _cursor(session, db.dialect, watched.chain_id)
    loaded = {shard: ShardSet() for shard in shards}
    pending = InvoiceStatus.PENDING.value
    async for groups in pending_groups(db, watched.chain_id, pending, shards):
        for group in groups:
            assets = loaded[group.shard].assets
            assets[group.token] = AssetSet.of(group.token, group.addresses, group.expires)
    watched.shards.update(loaded)
    watched.cursor = cursor if watched.cursor is None else min(watched.cursor, cursor)
    watched.loads += len(shards)
    watched.load_s = time.perf_counter() - started


async def _cursor(session: AsyncSession, dialect: str, chain_id: int) -> int:
    if dialect == "postgresql":
        return int((await session.execute(_PG_CURSOR)).scalar_one())
    return int((await session.execute(_SQLITE_CURSOR, {"chain_id": chain_id})).scalar_one())
