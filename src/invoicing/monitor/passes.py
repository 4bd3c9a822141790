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
So an invoice costs a pass one read, a row of a page, and no write; the database work is one
query per shard and one update of the shard records.

An escrow whose token balance is unreadable (a hostile or broken token) is unknown for that
invoice alone: it is flagged ``unreadable`` (its ``lastCheckedAt`` stays what it was) and the
rest of the pass goes on. A failed read fails the pass before it records anything, so the
shards are due again at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    String,
    Table,
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
from invoicing.invoices.coverage import (
    SHARDS,
    MonitorShard,
    last_checked,
    shard_of,
)
from invoicing.invoices.lifecycle import InvoiceStatus, late_window_over, reading_changes
from invoicing.invoices.models import Invoice
from invoicing.monitor.check import PARALLEL_READS, confirmed_block, store_balances
from invoicing.monitor.shards import load_records, record_pass
from invoicing.services import Services

INVOICES = cast(Table, Invoice.__table__)
# Passes run on the Core table: a shard's rows come back as plain rows, without the ORM's
# per-row result processing. The first columns are the fields of ``InvoiceState``; the rest
# decide ``lastCheckedAt`` (``invoices.coverage.Covered``).
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
    INVOICES.c.chain_id,
    INVOICES.c.watch,
    INVOICES.c.unreadable,
)
ALL_SHARDS = tuple(range(SHARDS))
# A row of ``PASS_COLUMNS``.
PassRow = Any
# Readings stored per transaction.
STORE_CHUNK = 500


@dataclass(frozen=True)
class PassResult:
    """What one pass did: invoices read, invoices written, newly paid, invoices whose balance
    was unreadable (left as they were), the block read at, and the shards it covered."""

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
    return await _run(services, chain, block, shards, InvoiceStatus.PENDING, paid_from, records)


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


Store = Callable[[Sequence[PassRow], Mapping[str, int | None]], Awaitable[None]]


async def _run(
    services: Services,
    chain: ChainGateway,
    block: int,
    shards: Sequence[int],
    status: InvoiceStatus,
    paid_from_block: int,
    records: Mapping[int, MonitorShard],
) -> PassResult:
    """One pass over ``shards``: select each shard's watched invoices of ``status``, read
    them in batches across shards (one ``balancesOf`` per token and ``monitor_batch_size``
    addresses), store each batch's changes as its read lands, then record the pass."""
    chain_id = chain.config.chain_id
    started_ms = services.clock.now_ms()
    counts = _Counts()
    stores = asyncio.Lock()

    async def store(rows: Sequence[PassRow], balances: Mapping[str, int | None]) -> None:
        async with stores:
            await _store(services, rows, balances, paid_from_block, status, records, counts)

    batches = _Batches(chain, block, services.settings.monitor_batch_size, store)
    try:
        for shard in shards:
            rows = await _select(services, chain_id, shard, status)
            await batches.add(rows)
        await batches.finish()
    finally:
        await batches.close()
    await record_pass(services, chain_id, shards, status, started_ms)
    return PassResult(
        block=block,
        checked=counts.checked,
        updated=counts.updated,
        paid=counts.paid,
        unreadable=counts.unreadable,
        shards=tuple(shards),
    )


async def _select(
    services: Services, chain_id: int, shard: int, status: InvoiceStatus
) -> list[PassRow]:
    invoices = INVOICES.c
    async with services.db.sessions() as session:
        result = await session.execute(
            select(*PASS_COLUMNS).where(
                invoices.chain_id == chain_id,
                invoices.status == status,
                invoices.shard == shard,
                # The watched-invoices index's own predicate, so both databases use it.
                text("watch"),
            )
        )
        return list(result)


@dataclass
class _Counts:
    checked: int = 0
    updated: int = 0
    paid: int = 0
    unreadable: int = 0


class _Batches:
    """Rows waiting for their read, per token; a batch is read (and then stored) as soon as it
    is full, at most ``PARALLEL_READS`` at a time, so reads overlap with the next shard's
    query. ``add`` waits while many batches are in flight: a pass holds a few batches of
    rows, not a whole chain."""

    def __init__(self, chain: ChainGateway, block: int, batch_size: int, store: Store) -> None:
        self.chain = chain
        self.block = block
        self.batch_size = batch_size
        self.store = store
        self._waiting: dict[str | None, list[PassRow]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(PARALLEL_READS)

    async def add(self, rows: Sequence[PassRow]) -> None:
        for row in rows:
            token = cast(str | None, row.token_address)
            group = self._waiting.setdefault(token, [])
            group.append(row)
            if len(group) >= self.batch_size:
                self._start(token, group)
                self._waiting[token] = []
        while len(self._tasks) > 2 * PARALLEL_READS:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def finish(self) -> None:
        for token, group in self._waiting.items():
            if group:
                self._start(token, group)
        self._waiting.clear()
        while self._tasks:
            done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
            self._collect(done)

    async def close(self) -> None:
        """Stop reads still running (after a failure) and collect their outcomes."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def _collect(self, done: set[asyncio.Task[None]]) -> None:
        self._tasks -= done
        for task in done:
            task.result()  # the first failure fails the pass

    def _start(self, token: str | None, rows: list[PassRow]) -> None:
        self._tasks.add(asyncio.ensure_future(self._read(token, rows)))

    async def _read(self, token: str | None, rows: list[PassRow]) -> None:
        async with self._gate:
            addresses = [cast(str, row.payment_address) for row in rows]
            values = await self.chain.balances(token, addresses, self.block)
        balances = {cast(str, row.id): value for row, value in zip(rows, values, strict=True)}
        await self.store(rows, balances)


async def _store(
    services: Services,
    rows: Sequence[PassRow],
    balances: Mapping[str, int | None],
    paid_from_block: int,
    status: InvoiceStatus,
    records: Mapping[int, MonitorShard],
    counts: _Counts,
) -> None:
    """Write the readings that change something (a readable reading of an invoice flagged
    unreadable clears the flag); flag the newly unreadable; stop watching expired invoices
    whose late-payment window is over."""
    now_ms = services.clock.now_ms()
    changed: list[str] = []
    unreadable = []
    for row in rows:
        state = cast(Invoice, row)
        reading = balances[state.id]
        if reading is None:
            counts.unreadable += 1
            if not state.unreadable:
                unreadable.append(state)
        elif state.unreadable or reading_changes(state, reading, now_ms):
            changed.append(state.id)
    counts.checked += len(rows) - sum(1 for row in rows if balances[cast(str, row.id)] is None)
    counts.updated += len(changed)
    for start in range(0, len(changed), STORE_CHUNK):
        ids = changed[start : start + STORE_CHUNK]
        stored = await store_balances(services, ids, balances, paid_from_block)
        counts.paid += sum(1 for invoice in stored if invoice.paid)
    if unreadable:
        await _flag_unreadable(services, unreadable, records)
    if status == InvoiceStatus.EXPIRED:
        window_ms = services.settings.late_payment_window_s * 1000
        finished = [
            cast(Invoice, row)
            for row in rows
            if late_window_over(cast(Invoice, row), now_ms, window_ms)
        ]
        if finished:
            await _stop_watching(services, finished, balances, now_ms)


async def _flag_unreadable(
    services: Services, rows: Sequence[Invoice], records: Mapping[int, MonitorShard]
) -> None:
    """Invoices whose balance just became unreadable keep the ``lastCheckedAt`` they had
    (their shard's passes no longer speak for them)."""
    async with services.db.transaction() as session:
        connection = await session.connection()
        await connection.execute(
            update(INVOICES)
            .where(INVOICES.c.id == bindparam("b_id"), INVOICES.c.watch.is_(True))
            .values(unreadable=True, last_checked_at=bindparam("b_checked")),
            [
                {"b_id": row.id, "b_checked": last_checked(row, records.get(shard_of(row.id)))}
                for row in rows
            ],
        )


async def _stop_watching(
    services: Services,
    rows: Sequence[Invoice],
    balances: Mapping[str, int | None],
    now_ms: int,
) -> None:
    """Expired invoices whose late-payment window has closed stop being watched; those read
    now keep this check as their ``lastCheckedAt``."""
    read = [row.id for row in rows if balances[row.id] is not None]
    unread = [row.id for row in rows if balances[row.id] is None]
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
