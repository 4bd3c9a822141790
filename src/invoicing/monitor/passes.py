"""Monitor passes: claim due invoices, read their escrows at one block, store the readings.

Two kinds of pass share the code:

- the due pass claims invoices whose ``next_check_at`` has come (pending every
  ``monitor_interval_s``, expired every ``monitor_expired_interval_s`` during the late-payment
  window) and always moves their ``lastCheckedAt``;
- the block pass reads every pending invoice of a chain when its head moves, so a payment is
  seen within one block; it only writes invoices whose reading changes something.

Claims are row locks (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite serializes writers) that
push ``next_check_at`` forward, so worker processes sharing a database split the work.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, select, update
from sqlalchemy.engine import Row

from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.models import Invoice, InvoiceStatus
from invoicing.monitor.check import confirmed_block, read_balances, store_balances
from invoicing.services import Services

CLAIM_COLUMNS = (
    Invoice.id,
    Invoice.payment_address,
    Invoice.token_address,
    Invoice.status,
    Invoice.balance_raw,
    Invoice.required_raw,
    Invoice.expires_at,
)


# (id, payment_address, token_address, status, balance_raw, required_raw, expires_at)
ClaimRow = Row[str, str, str | None, str, str, str, int]


@dataclass(frozen=True)
class PassResult:
    """What one pass did: invoices read, invoices written, newly paid, block read at."""

    block: int
    checked: int = 0
    updated: int = 0
    paid: int = 0


def needs_apply(row: ClaimRow, balance: int, now_ms: int) -> bool:
    """Whether a reading changes the invoice beyond its lastCheckedAt."""
    if str(balance) != row.balance_raw or balance >= int(row.required_raw):
        return True
    return bool(row.status == InvoiceStatus.PENDING and now_ms >= row.expires_at)


async def claim_due(services: Services, chain_id: int, now_ms: int, limit: int) -> list[ClaimRow]:
    """Take up to ``limit`` watched invoices whose check is due, and push their next check."""
    settings = services.settings
    interval_ms = int(settings.monitor_interval_s * 1000)
    expired_interval_ms = int(settings.monitor_expired_interval_s * 1000)
    async with services.db.transaction() as session:
        due = (
            select(Invoice.id)
            .where(
                Invoice.chain_id == chain_id,
                Invoice.watch.is_(True),
                Invoice.next_check_at <= now_ms,
            )
            .order_by(Invoice.next_check_at, Invoice.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        rows = list(await session.execute(select(*CLAIM_COLUMNS).where(Invoice.id.in_(due))))
        if rows:
            late = (Invoice.status == InvoiceStatus.EXPIRED) | (Invoice.expires_at <= now_ms)
            await session.execute(
                update(Invoice)
                .where(Invoice.id.in_([row.id for row in rows]))
                .values(
                    next_check_at=case(
                        (late, now_ms + expired_interval_ms), else_=now_ms + interval_ms
                    )
                )
                .execution_options(synchronize_session=False)
            )
    return rows


async def run_due_pass(
    services: Services, chain: ChainGateway, block: int | None = None
) -> PassResult:
    """Check every invoice due on ``chain`` now, in claims of ``monitor_batch_size``."""
    if block is None:
        block = await confirmed_block(chain)
    total = PassResult(block=block)
    limit = services.settings.monitor_batch_size * 4
    while True:
        now_ms = services.clock.now_ms()
        rows = await claim_due(services, chain.config.chain_id, now_ms, limit)
        if not rows:
            return total
        result = await _check(services, chain, rows, block, touch_all=True)
        total = PassResult(
            block,
            total.checked + result.checked,
            total.updated + result.updated,
            total.paid + result.paid,
        )
        if len(rows) < limit:
            return total


async def run_block_pass(services: Services, chain: ChainGateway, block: int) -> PassResult:
    """Read every pending watched invoice of ``chain`` at ``block``; store what changed."""
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
    return await _check(services, chain, rows, block, touch_all=False)


async def _check(
    services: Services,
    chain: ChainGateway,
    rows: list[ClaimRow],
    block: int,
    *,
    touch_all: bool,
) -> PassResult:
    balances = await read_balances(chain, rows, block, services.settings.monitor_batch_size)
    now_ms = services.clock.now_ms()
    changed = [row.id for row in rows if needs_apply(row, balances[row.id], now_ms)]
    paid = 0
    for start in range(0, len(changed), 500):
        ids = changed[start : start + 500]
        stored = await store_balances(services, ids, balances)
        paid += sum(1 for invoice in stored if invoice.paid)
    if touch_all:
        applied = set(changed)
        await _touch_unchanged(services, [row for row in rows if row.id not in applied], now_ms)
    return PassResult(block=block, checked=len(rows), updated=len(changed), paid=paid)


async def _touch_unchanged(
    services: Services,
    rows: list[ClaimRow],
    now_ms: int,
) -> None:
    """Move lastCheckedAt of unchanged invoices in bulk; expired invoices whose late-payment
    window has closed stop being watched."""
    window_ms = services.settings.late_payment_window_s * 1000
    finished = [
        row.id
        for row in rows
        if row.status == InvoiceStatus.EXPIRED and now_ms > row.expires_at + window_ms
    ]
    ids = [row.id for row in rows]
    async with services.db.transaction() as session:
        for start in range(0, len(ids), 5000):
            await session.execute(
                update(Invoice)
                .where(Invoice.id.in_(ids[start : start + 5000]))
                .values(last_checked_at=now_ms)
                .execution_options(synchronize_session=False)
            )
        for start in range(0, len(finished), 5000):
            await session.execute(
                update(Invoice)
                .where(Invoice.id.in_(finished[start : start + 5000]))
                .values(watch=False)
                .execution_options(synchronize_session=False)
            )
