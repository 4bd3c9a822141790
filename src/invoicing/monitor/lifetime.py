"""The lifetime pass: every escrow that ever held funds is read for life, at a low rate.

Once an invoice's late-payment window is over (``invoices.lifetime_check_at``, set at
create), its escrow is read once more. From then on it is read every
``lifetime_check_interval_s`` (a day by default) only if it ever held funds: a balance or a
sweep recorded by the monitor, refunds or other assets (``has_extras``), or funds found by
this pass. An escrow that never held any is read that once and then left (its
``lifetime_check_at`` becomes :data:`NEVER_MS`), so an owner who creates and deletes
invoices in a loop leaves no daily work behind (see docs/security.md); funds sent to it
later are recovered with ``invoicing recover``. A read covers its own token, every
allow-listed token of the chain and the native coin: one ``balancesOf``
eth_call per asset and chunk of ``monitor_batch_size`` escrows, all at one block. What it
finds goes into ``escrow_assets`` (``settlement.assets``), from where the settlement worker
sweeps it to the owner. An unreadable balance (a hostile token) is unknown: it changes
nothing and never fails the pass.

Claims work like the monitor's due pass: one statement locks the due rows (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL) and pushes their check a whole interval on, through the index on
(chain, ``lifetime_check_at``); a pass that fails to read gives its claims back. At rest a
poll finds nothing due and sends no RPC call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import ColumnElement, Table, bindparam, case, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.gateway import ChainGateway
from invoicing.errors import ChainUnavailable
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import id_in
from invoicing.services import Services
from invoicing.settlement.assets import Escrow, read_assets, record_readings
from invoicing.tables.invoices import Invoice

INVOICES = cast(Table, Invoice.__table__)
_COLUMNS = (
    INVOICES.c.id,
    INVOICES.c.payment_address,
    INVOICES.c.token_address,
    INVOICES.c.status,
    INVOICES.c.lifetime_check_at,
)


# ``lifetime_check_at`` of an escrow that never held funds once its window is over: never due.
NEVER_MS = 2**62

# Pages one pass reads at most: the pass runs inside the monitor's loop, so a backlog (the
# first pass after an upgrade) is read over several ticks, never holding up the block pass.
PAGES_PER_PASS = 10


@dataclass(frozen=True)
class LifetimePassResult:
    """Escrows read, non-zero assets found among them (own token of settled invoices and
    other assets), unreadable readings (left as they were), and whether more may be due
    (the pass stopped at ``PAGES_PER_PASS``)."""

    checked: int = 0
    found: int = 0
    unreadable: int = 0
    more: bool = False


@dataclass(frozen=True)
class _Claim:
    escrow: Escrow
    previous_check_at: int


async def claim_lifetime_due(
    services: Services, chain_id: int, now_ms: int, limit: int
) -> list[_Claim]:
    """Take up to ``limit`` escrows whose lifetime check is due and push it an interval on."""
    next_check = _next_check(services, now_ms)
    invoices = INVOICES.c
    due = (
        select(*_COLUMNS)
        .where(invoices.chain_id == chain_id, invoices.lifetime_check_at <= now_ms)
        .order_by(invoices.lifetime_check_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    async with services.db.transaction() as session:
        connection = await session.connection()
        if services.db.dialect == "postgresql":
            locked = due.cte("due")
            claim = (
                update(INVOICES)
                .where(invoices.id == locked.c.id)
                .values(lifetime_check_at=_then(next_check))
                .returning(*_COLUMNS[:-1], locked.c.lifetime_check_at)
            )
            rows = (await connection.execute(claim)).all()
        else:
            rows = list((await connection.execute(due)).all())
            if rows:
                await connection.execute(
                    update(INVOICES)
                    .where(id_in([row.id for row in rows], services.db.dialect))
                    .values(lifetime_check_at=_then(next_check))
                )
    return [_Claim(Escrow(*row[:4]), row[4]) for row in rows]


def _next_check(services: Services, now_ms: int) -> int:
    return now_ms + int(services.settings.lifetime_check_interval_s * 1000)


def _then(next_check: int) -> ColumnElement[int]:
    """A claimed escrow's next check: in an interval if it ever held funds, else never (unless
    this read finds some: :func:`_keep_funded`)."""
    invoices = INVOICES.c
    held_funds = or_(invoices.balance_raw != "0", invoices.swept_raw != "0", invoices.has_extras)
    return case((held_funds, next_check), else_=NEVER_MS)


async def _keep_funded(
    session: AsyncSession, services: Services, escrow_ids: list[str], now_ms: int
) -> None:
    """Escrows this pass found funds in are read for life from now on (``has_extras`` keeps
    that known after a sweep empties them; it only makes owner views look for extras)."""
    if escrow_ids:
        await session.execute(
            update(INVOICES)
            .where(id_in(escrow_ids, services.db.dialect))
            .values(lifetime_check_at=_next_check(services, now_ms), has_extras=True)
        )


async def release_lifetime_claims(services: Services, claims: Sequence[_Claim]) -> None:
    """Claims whose read failed are due again as they were."""
    async with services.db.transaction() as session:
        connection = await session.connection()
        await connection.execute(
            update(INVOICES)
            .where(INVOICES.c.id == bindparam("b_id"))
            .values(lifetime_check_at=bindparam("b_previous")),
            [{"b_id": c.escrow.id, "b_previous": c.previous_check_at} for c in claims],
        )


async def run_lifetime_pass(
    services: Services, chain: ChainGateway, block: int | None = None
) -> LifetimePassResult:
    """Read the escrows of ``chain`` whose lifetime check is due, page by page (a page is
    one chunk of ``monitor_batch_size`` escrows, up to ``PAGES_PER_PASS``), and record what
    they hold."""
    page_size = services.settings.monitor_batch_size
    checked = found = unreadable = 0
    for _ in range(PAGES_PER_PASS):
        now_ms = services.clock.now_ms()
        claims = await claim_lifetime_due(services, chain.config.chain_id, now_ms, page_size)
        if not claims:
            return LifetimePassResult(checked, found, unreadable)
        try:
            if block is None:
                block = await confirmed_block(chain)
            escrows = [claim.escrow for claim in claims]
            readings = await read_assets(chain, escrows, block, page_size)
            async with services.db.transaction() as session:
                found += await record_readings(
                    session, services.db.dialect, chain.config.chain_id, readings, now_ms
                )
                funded = sorted({r.escrow.id for r in readings if r.balance})
                await _keep_funded(session, services, funded, now_ms)
        except (ChainUnavailable, SQLAlchemyError, OSError):
            with contextlib.suppress(SQLAlchemyError, OSError):
                await release_lifetime_claims(services, claims)
            raise
        checked += len(claims)
        unreadable += sum(1 for reading in readings if reading.balance is None)
        if len(claims) < page_size:
            return LifetimePassResult(checked, found, unreadable)
    return LifetimePassResult(checked, found, unreadable, more=True)
