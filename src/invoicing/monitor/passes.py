"""Monitor passes: claim due invoices, read their escrows at one block, store the readings.

Two kinds of pass share the code:

- the due pass claims invoices whose ``next_check_at`` has come (pending every
  ``monitor_interval_s``, expired every ``monitor_expired_interval_s`` during the late-payment
  window) and always moves their ``lastCheckedAt``;
- the block pass reads every pending invoice of a chain when its head moves, so a payment is
  seen within one block; it only writes invoices whose reading changes something.

Claims are row locks (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite serializes writers) that
push ``next_check_at`` forward, so worker processes sharing a database split the work.

An escrow whose token balance is unreadable (a hostile or broken token) is unknown for that
invoice alone: it is not written (its claim keeps the pushed ``next_check_at`` but gets its
previous ``lastCheckedAt`` back), and the rest of the pass goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from sqlalchemy import (
    ColumnElement,
    String,
    Table,
    any_,
    bindparam,
    case,
    column,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import SQLAlchemyError

from invoicing.chain.gateway import ChainGateway
from invoicing.errors import ChainUnavailable
from invoicing.invoices.lifecycle import InvoiceStatus, late_window_over, reading_changes
from invoicing.invoices.models import Invoice, InvoiceState
from invoicing.monitor.check import BalanceReader, confirmed_block, read_balances, store_balances
from invoicing.services import Services

INVOICES = cast(Table, Invoice.__table__)
# Claims and reads run on the Core table: a page's rows come back as plain rows, without the
# ORM's per-row result processing (a pass handles every watched invoice). The columns are the
# fields of ``InvoiceState``, which types the rows; ``last_checked_at`` of a claimed row is the
# value from before the claim, in case the read fails.
CLAIM_COLUMNS = (
    INVOICES.c.id,
    INVOICES.c.payment_address,
    INVOICES.c.token_address,
    INVOICES.c.status,
    INVOICES.c.balance_raw,
    INVOICES.c.required_raw,
    INVOICES.c.expires_at,
    INVOICES.c.tolerance_bps,
    INVOICES.c.last_checked_at,
)


# Invoices claimed per statement; a pass claims page after page until nothing is due.
CLAIM_PAGE = 20_000
# Claim statements in flight at once on PostgreSQL (SKIP LOCKED keeps them apart); the claim
# is the pass's bottleneck (one non-HOT row update per invoice), and one backend leaves the
# server's other cores idle. SQLite serializes writers, so it claims one page at a time.
PARALLEL_CLAIMS = 2


@dataclass(frozen=True)
class PassResult:
    """What one pass did: invoices read, invoices written, newly paid, invoices whose balance
    was unreadable (left as they were), block read at, and the readings (by invoice id)."""

    block: int
    checked: int = 0
    updated: int = 0
    paid: int = 0
    unreadable: int = 0
    readings: Mapping[str, int | None] = field(default_factory=dict, repr=False, compare=False)


async def claim_due(
    services: Services, chain_id: int, now_ms: int, limit: int
) -> list[InvoiceState]:
    """Take up to ``limit`` watched invoices whose check is due: lock them (``FOR UPDATE SKIP
    LOCKED``: concurrent workers skip each other's rows), push their next check and mark them
    checked now. The rows carry the previous ``last_checked_at`` in case the read fails."""
    settings = services.settings
    interval_ms = int(settings.monitor_interval_s * 1000)
    expired_interval_ms = int(settings.monitor_expired_interval_s * 1000)
    invoices = INVOICES.c
    due = (
        select(*CLAIM_COLUMNS)
        .where(
            invoices.chain_id == chain_id,
            invoices.watch.is_(True),
            invoices.next_check_at <= now_ms,
        )
        .order_by(invoices.next_check_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    late = (invoices.status == InvoiceStatus.EXPIRED) | (invoices.expires_at <= now_ms)
    next_check = case((late, now_ms + expired_interval_ms), else_=now_ms + interval_ms)
    async with services.db.transaction() as session:
        connection = await session.connection()
        if services.db.dialect == "postgresql":
            # One statement: lock the due rows (skipping other workers' locks), move them on
            # and return what the read needs, without sending the ids back and forth.
            locked = due.cte("due")
            previous = locked.c.last_checked_at
            claim = (
                update(INVOICES)
                .where(invoices.id == locked.c.id)
                .values(next_check_at=next_check, last_checked_at=now_ms)
                .returning(*CLAIM_COLUMNS[:-1], previous.label("last_checked_at"))
            )
            return cast(list[InvoiceState], (await connection.execute(claim)).all())
        rows = cast(list[InvoiceState], (await connection.execute(due)).all())
        if rows:
            await connection.execute(
                update(INVOICES)
                .where(id_in([row.id for row in rows], services.db.dialect))
                .values(next_check_at=next_check, last_checked_at=now_ms)
            )
    return rows


async def release_claims(services: Services, rows: Sequence[InvoiceState]) -> None:
    """Undo claims whose read failed: due again at once, last check as it was before."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        connection = await session.connection()
        await connection.execute(
            update(INVOICES)
            .where(INVOICES.c.id == bindparam("b_id"))
            .values(last_checked_at=bindparam("b_previous"), next_check_at=now_ms),
            [{"b_id": row.id, "b_previous": row.last_checked_at} for row in rows],
        )


async def restore_last_checked(services: Services, rows: Sequence[InvoiceState]) -> None:
    """Claimed invoices whose balance was unreadable were not checked: their lastCheckedAt
    goes back to what it was (their next check stays where the claim put it)."""
    async with services.db.transaction() as session:
        connection = await session.connection()
        await connection.execute(
            update(INVOICES)
            .where(INVOICES.c.id == bindparam("b_id"))
            .values(last_checked_at=bindparam("b_previous")),
            [{"b_id": row.id, "b_previous": row.last_checked_at} for row in rows],
        )


async def run_due_pass(
    services: Services,
    chain: ChainGateway,
    block: int | None = None,
    block_pass: PassResult | None = None,
) -> PassResult:
    """Check every invoice due on ``chain`` now: claim them all (in pages), then read them at
    one block in chunks of ``monitor_batch_size`` and store the readings. Invoices that
    ``block_pass`` read at this same block are not read again (so at rest the due pass sends
    no RPC call for pending invoices)."""
    if block is None:
        block = await confirmed_block(chain)
    known = block_pass.readings if block_pass is not None and block_pass.block == block else None
    reader = BalanceReader(chain, block, services.settings.monitor_batch_size, known)
    rows: list[InvoiceState] = []

    async def claim_pages() -> None:
        while True:
            now_ms = services.clock.now_ms()
            page = await claim_due(services, chain.config.chain_id, now_ms, CLAIM_PAGE)
            rows.extend(page)
            reader.add(page)
            if len(page) < CLAIM_PAGE:
                return

    claimers = PARALLEL_CLAIMS if services.db.dialect == "postgresql" else 1
    try:
        # Every claimer's pages are collected even when another one fails, so that every
        # claim taken is stored or released.
        outcomes = await asyncio.gather(
            *(claim_pages() for _ in range(claimers)), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if not rows:
            return PassResult(block=block)
        balances = await reader.result()
        return await _store(services, rows, balances, block, block, claimed=True)
    except (ChainUnavailable, SQLAlchemyError, OSError):
        if rows:
            with contextlib.suppress(SQLAlchemyError, OSError):
                await release_claims(services, rows)
        raise
    finally:
        await reader.close()


async def run_block_pass(
    services: Services, chain: ChainGateway, block: int, first_unread: int | None = None
) -> PassResult:
    """Read every pending watched invoice of ``chain`` at ``block``; store what changed.
    ``first_unread``: the first block the previous block pass did not read (a payment found
    now is in it or after it; default ``block``)."""
    async with services.db.sessions() as session:
        rows = list(
            await session.execute(
                select(*CLAIM_COLUMNS).where(
                    Invoice.chain_id == chain.config.chain_id,
                    Invoice.watch.is_(True),
                    Invoice.status == InvoiceStatus.PENDING,
                )
            )
        )
    if not rows:
        return PassResult(block=block)
    balances = await read_balances(chain, rows, block, services.settings.monitor_batch_size)
    paid_from = block if first_unread is None else min(first_unread, block)
    result = await _store(services, rows, balances, paid_from, block, claimed=False)
    return replace(result, readings=balances)


async def _store(
    services: Services,
    rows: Sequence[InvoiceState],
    balances: Mapping[str, int | None],
    paid_from_block: int,
    block: int,
    *,
    claimed: bool,
) -> PassResult:
    now_ms = services.clock.now_ms()
    changed = []
    unreadable = []
    for row in rows:
        reading = balances[row.id]
        if reading is None:
            unreadable.append(row)
        elif reading_changes(row, reading, now_ms):
            changed.append(row.id)
    paid = 0
    for start in range(0, len(changed), 500):
        ids = changed[start : start + 500]
        stored = await store_balances(services, ids, balances, paid_from_block)
        paid += sum(1 for invoice in stored if invoice.paid)
    if claimed:
        if unreadable:
            await restore_last_checked(services, unreadable)
        await _stop_watching_closed(services, rows, now_ms)
    checked = len(rows) - len(unreadable)
    return PassResult(
        block=block, checked=checked, updated=len(changed), paid=paid, unreadable=len(unreadable)
    )


async def _stop_watching_closed(
    services: Services, rows: Sequence[InvoiceState], now_ms: int
) -> None:
    """Expired invoices whose late-payment window has closed stop being watched."""
    window_ms = services.settings.late_payment_window_s * 1000
    finished = [row.id for row in rows if late_window_over(row, now_ms, window_ms)]
    if finished:
        async with services.db.transaction() as session:
            await session.execute(
                update(Invoice)
                .where(id_in(finished, services.db.dialect))
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
