"""Monitor passes: read a chain's watched invoices shard by shard at one block and write only
what changed.

A pass covers some shards of a chain (``invoices.coverage``; a worker passes the shards it
leases, ``monitor.shards``) and one kind of watched invoice:

- the block pass reads every pending invoice of its shards when the head moves, so a payment
  is seen within one block;
- the due pass reads, shard by shard, what no pass has read for a while: the pending
  invoices of a shard not read within ``monitor_interval_s`` (a head that stands still), and
  the expired ones (still watched during the late-payment window) every
  ``monitor_expired_interval_s``.

Neither writes a row whose reading changes nothing. Each pass ends by writing one record per
shard (when it read, and which invoices it covered): that is the invoices' ``lastCheckedAt``.
So an invoice costs a pass one read and no write. A pending pass reads its invoices from
the worker's watched set (``monitor.watched``), which reads from the database only what
changed since the last pass (``monitor.changes``); the expired pass streams their rows.
The database work of a pass is those changes, the rows of the readings that can change
something, and one update of the shard records.

An escrow whose token balance is unreadable (a hostile or broken token) is unknown for that
invoice alone: it is flagged ``unreadable`` (its ``lastCheckedAt`` stays what it was) and the
rest of the pass goes on. A failed read fails the pass before it records anything, so the
shards are due again at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    any_,
    bindparam,
    column,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.coverage import passed_at
from invoicing.invoices.lifecycle import InvoiceStatus, late_window_over, reading_changes
from invoicing.monitor.batches import Batches, PassRow
from invoicing.monitor.changes import refresh, watched_of
from invoicing.monitor.check import (
    confirmed_block,
    observe_detection,
    store_balances,
)
from invoicing.monitor.scan import INVOICES, LOUD, PASS_COLUMNS, rows_at
from invoicing.monitor.shards import load_records, record_pass
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.monitor import SHARDS, MonitorShard

ALL_SHARDS = tuple(range(SHARDS))
# Rows per page of the expired pass's one query, streamed (a server-side cursor on
# PostgreSQL): a few pages in memory.
PAGE = 20_000
# Readings stored per transaction.
STORE_CHUNK = 500


@dataclass(frozen=True)
class PassResult:
    """What one pass did: invoices read, written, newly paid and unreadable (left as they
    were), the block read at, and the shards it covered."""

    block: int
    checked: int = 0
    updated: int = 0
    paid: int = 0
    unreadable: int = 0
    shards: tuple[int, ...] = field(default=(), compare=False)

    def __add__(self, other: PassResult) -> PassResult:
        return PassResult(
            block=max(self.block, other.block),
            checked=self.checked + other.checked,
            updated=self.updated + other.updated,
            paid=self.paid + other.paid,
            unreadable=self.unreadable + other.unreadable,
            shards=(*self.shards, *other.shards),
        )


async def run_block_pass(
    services: Services,
    chain: ChainGateway,
    block: int,
    first_unread: int | None = None,
    shards: Sequence[int] = ALL_SHARDS,
) -> PassResult:
    """Read every pending watched invoice of ``shards`` of ``chain`` at ``block``; store what
    changed. ``first_unread``: the first block the previous block pass did not read (a
    payment found now is in it or after it; default ``block``)."""
    paid_from = block if first_unread is None else min(first_unread, block)
    records = await load_records(services, chain.config.chain_id, shards)
    return await _run(
        services,
        chain,
        block,
        shards,
        InvoiceStatus.PENDING,
        paid_from,
        records,
        first_unread,
        held=shards,
    )


async def run_due_pass(
    services: Services,
    chain: ChainGateway,
    block: int | None = None,
    shards: Sequence[int] = ALL_SHARDS,
) -> PassResult:
    """Read the shards whose pending invoices no pass read for ``monitor_interval_s`` (the
    head stood still) and those whose expired invoices are due. Reads the head only when
    something is due (``block`` 0 in the result when nothing was)."""
    settings = services.settings
    pending_ms = int(settings.monitor_interval_s * 1000)
    expired_ms = int(settings.monitor_expired_interval_s * 1000)
    records = await load_records(services, chain.config.chain_id, shards)
    now_ms = services.clock.now_ms()
    pending = [
        s for s in shards if s not in records or records[s].pending_at + pending_ms <= now_ms
    ]
    expired = [
        s for s in shards if s not in records or records[s].expired_at + expired_ms <= now_ms
    ]
    result = PassResult(block=0)
    if not pending and not expired:
        return result
    if block is None:
        block = await confirmed_block(chain)
    if pending:
        result += await _run(services, chain, block, pending, InvoiceStatus.PENDING, block, records)
    if expired:
        result += await _run(services, chain, block, expired, InvoiceStatus.EXPIRED, block, records)
    return result


async def _run(
    services: Services,
    chain: ChainGateway,
    block: int,
    shards: Sequence[int],
    status: InvoiceStatus,
    paid_from_block: int,
    records: Mapping[int, MonitorShard],
    first_unread: int | None = None,
    held: Sequence[int] | None = None,
) -> PassResult:
    """One pass over ``shards``: select each shard's watched invoices of ``status`` (the
    pending ones from this worker's watched set, ``monitor.changes``; ``held``: every shard
    the worker leases), read them in batches across shards and assets (one EscrowReader
    call per ``monitor_read_gas`` of estimated gas), store each batch's changes as its read
    lands, then record the pass."""
    chain_id = chain.config.chain_id
    started_ms = services.clock.now_ms()
    counts = _Counts()
    stores = asyncio.Lock()

    async def store(
        addresses: Sequence[str], tags: list[Any], readings: Sequence[int | None]
    ) -> None:
        if status == InvoiceStatus.PENDING:
            picked = _picked(addresses, tags, readings, services.clock.now_ms(), counts)
            if not picked:
                return
            rows = await rows_at(services.db, chain_id, status, list(picked))
            tags, readings = rows, [picked[row.payment_address.lower()] for row in rows]
        async with stores:
            await _store(services, block, tags, readings, status, records, counts, first_unread)

    batches = Batches(chain, block, store, services.settings.monitor_read_gas)
    try:
        if status == InvoiceStatus.PENDING:
            watched = watched_of(services.db, chain_id)
            async with watched.lock:
                await refresh(services.db, watched, shards, held)
                for shard in shards:
                    for token, accounts, expires in watched.shards[shard].pieces():
                        batches.add(token, accounts, expires)
                        await batches.wait()
                await batches.finish()
        else:
            query = select(*PASS_COLUMNS).where(
                INVOICES.c.chain_id == chain_id,
                INVOICES.c.status == status,
                INVOICES.c.shard.in_(list(shards)),
                # The watched-invoices index's own predicate, so both databases use it.
                text("watch"),
            )
            async with services.db.sessions() as session:
                result = await session.stream(query.execution_options(yield_per=PAGE))
                async for page in result.partitions():
                    await batches.add_rows(page)
            await batches.finish()
    finally:
        await batches.close()
    if counts.newly_paid:  # one header read for the pass's payments
        await observe_detection(services, chain_id, paid_from_block, counts.newly_paid)
    await record_pass(services, chain_id, shards, status, started_ms)
    return PassResult(
        block=block,
        checked=counts.checked,
        updated=counts.updated,
        paid=counts.paid,
        unreadable=counts.unreadable,
        shards=tuple(shards),
    )


def _picked(
    addresses: Sequence[str],
    expires: Sequence[int],
    readings: Sequence[int | None],
    now_ms: int,
    counts: _Counts,
) -> dict[str, int | None]:
    """The readings of a batch of the watched set (``monitor.watched``) to decide on the
    full row, by address: every one but a zero reading of a quiet invoice before its
    expiry (the common case, decided for the whole batch at once)."""
    quiet = min(expires, default=LOUD) > now_ms
    if quiet and readings.count(0) == len(readings):
        counts.checked += len(readings)
        return {}
    if quiet:
        indexes = [i for i, reading in enumerate(readings) if reading != 0]
    else:
        indexes = [
            i
            for i, (expiry, reading) in enumerate(zip(expires, readings, strict=True))
            if reading != 0 or expiry <= now_ms
        ]
    picked = {addresses[i]: readings[i] for i in indexes}
    counts.checked += len(readings) - len(picked)
    return picked


@dataclass
class _Counts:
    checked: int = 0
    updated: int = 0
    paid: int = 0
    unreadable: int = 0
    newly_paid: list[Invoice] = field(default_factory=list)


async def _store(
    services: Services,
    block: int,
    rows: Sequence[PassRow],
    readings: Sequence[int | None],
    status: InvoiceStatus,
    records: Mapping[int, MonitorShard],
    counts: _Counts,
    first_unread: int | None = None,
) -> None:
    """Write the readings (made at ``block``) that change something (a readable reading of an
    invoice flagged unreadable clears the flag); flag the newly unreadable; stop watching
    expired invoices whose late-payment window is over."""
    now_ms = services.clock.now_ms()
    changed: dict[str, int | None] = {}
    unreadable = []
    for row, reading in zip(rows, readings, strict=True):
        if reading is None:
            unreadable.append(row)
        elif row.unreadable:
            changed[row.id] = reading
        elif nothing_arrived(row, reading, now_ms):
            continue
        elif reading_changes(row, reading, now_ms):
            changed[row.id] = reading
    counts.checked += len(rows) - len(unreadable)
    counts.unreadable += len(unreadable)
    counts.updated += len(changed)
    ids = list(changed)
    for start in range(0, len(ids), STORE_CHUNK):
        chunk = ids[start : start + STORE_CHUNK]
        stored = await store_balances(services, chunk, changed, block, first_unread=first_unread)
        counts.paid += len(stored.newly_paid)
        counts.newly_paid.extend(stored.newly_paid)
    newly_unreadable = [row for row in unreadable if not row.unreadable]
    if newly_unreadable:
        await _flag_unreadable(services, newly_unreadable, records)
    if status == InvoiceStatus.EXPIRED:
        window_ms = services.settings.late_payment_window_s * 1000
        read = {row.id for row in rows} - {row.id for row in unreadable}
        finished = [row for row in rows if late_window_over(row, now_ms, window_ms)]
        if finished:
            await _stop_watching(services, finished, read, now_ms)


def nothing_arrived(row: PassRow, reading: int, now_ms: int) -> bool:
    """A zero reading of an invoice that nothing has reached and that is not past its
    expiry: no move (``lifecycle.on_reading`` agrees; a test holds them together). It is
    the answer for most rows of most passes, so it is decided without the lifecycle."""
    return (
        reading == 0
        and row.balance_raw == "0"
        and now_ms < row.expires_at
        and row.required_raw != "0"
    )


async def _flag_unreadable(
    services: Services, rows: Sequence[PassRow], records: Mapping[int, MonitorShard]
) -> None:
    """Newly unreadable invoices keep the ``lastCheckedAt`` they had (no longer their
    shard's)."""
    async with services.db.transaction() as session:
        connection = await session.connection()
        await connection.execute(
            update(INVOICES)
            .where(INVOICES.c.id == bindparam("b_id"), INVOICES.c.watch.is_(True))
            .values(unreadable=True, last_checked_at=bindparam("b_checked")),
            [
                {
                    "b_id": row.id,
                    "b_checked": max(
                        row.last_checked_at, passed_at(records.get(row.shard), row.status)
                    ),
                }
                for row in rows
            ],
        )


async def _stop_watching(
    services: Services, rows: Sequence[PassRow], readable: set[str], now_ms: int
) -> None:
    """Expired invoices whose late-payment window has closed stop being watched; those read
    now keep this check as their ``lastCheckedAt``."""
    read = [row.id for row in rows if row.id in readable]
    unread = [row.id for row in rows if row.id not in readable]
    dialect = services.db.dialect
    async with services.db.transaction() as session:
        if read:
            await session.execute(
                update(Invoice)
                .where(id_in(read, dialect))
                .values(watch=False, last_checked_at=now_ms)
                .execution_options(synchronize_session=False)
            )
        if unread:
            await session.execute(
                update(Invoice)
                .where(id_in(unread, dialect))
                .values(watch=False)
                .execution_options(synchronize_session=False)
            )


def id_in(ids: list[str], dialect: str) -> ColumnElement[bool]:
    """``invoices.id IN ids`` with the whole list as ONE bound value (a PostgreSQL array or a
    SQLite JSON array): tens of thousands of ids without tens of thousands of parameters."""
    if dialect == "postgresql":
        return Invoice.id == any_(bindparam("ids", ids, type_=ARRAY(String)))
    listed = select(column("value", String)).select_from(
        func.json_each(bindparam("ids", json.dumps(ids)))
    )
    return Invoice.id.in_(listed.scalar_subquery())
