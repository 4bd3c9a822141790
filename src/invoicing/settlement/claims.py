"""A pending withdrawal claims its invoices (``withdrawal_items``): no other batch takes them
until its transaction is final, so an escrow is never swept twice; a reverted or dropped
withdrawal releases them for the next pass (``settlement.candidates``).

The claim is written as the relayer records the withdraw's transaction, under its account lock,
which every batch of the chain passes through: two processes cannot both claim an invoice.

The refunds table (``tables.refunds``) gives the last look under the relayer lock that no
refund of a claimed escrow is in flight.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.settlement.candidates import Batch, claimed_ids
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import pending_refund_ids
from invoicing.tables.settlement import (
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)


class AlreadyClaimed(Exception):
    """Another process claimed some of the batch's invoices first."""


async def sweep_counts(session: AsyncSession, ids: list[str]) -> dict[str, int]:
    """How many withdrawals (any status) each invoice has been part of."""
    rows = await session.execute(
        select(WithdrawalItem.invoice_id, func.count())
        .where(WithdrawalItem.invoice_id.in_(ids))
        .group_by(WithdrawalItem.invoice_id)
    )
    return {invoice_id: int(count) for invoice_id, count in rows}


async def taken_since(
    session: AsyncSession, invoices: Sequence[Invoice], seen: dict[str, int]
) -> set[str]:
    """The ids of ``invoices`` that another process took since a pass read them (their copies
    here) and their withdrawal counts (``seen``): held by a pending withdrawal, part of one
    more, or swept or no longer in the state read. The counts alone miss a sweep claimed
    between the pass's read of its candidates and its read of the counts."""
    ids = [invoice.id for invoice in invoices]
    held = set(await session.scalars(claimed_ids().where(WithdrawalItem.invoice_id.in_(ids))))
    counts = await sweep_counts(session, ids)
    now = {
        row.id: (row.status, row.swept_raw)
        for row in await session.execute(
            select(Invoice.id, Invoice.status, Invoice.swept_raw).where(Invoice.id.in_(ids))
        )
    }
    return {
        i.id
        for i in invoices
        if i.id in held
        or counts.get(i.id) != seen.get(i.id)
        or now.get(i.id) != (i.status, i.swept_raw)
    }


async def claim_invoices(
    session: AsyncSession,
    batch: Batch,
    row: RelayerTransaction,
    seen: dict[str, int],
    balances: dict[str, int | None],
    now_ms: int,
) -> None:
    """Record the withdrawal and its items, unless another batch took an invoice since this
    one read the balances (``balances``) and how many withdrawals each invoice had been part
    of (``seen``). Runs under the relayer account lock, which every batch of this chain passes
    through, so two processes cannot both pass this check."""
    ids = [invoice.id for invoice in batch.invoices]
    held = await session.scalar(claimed_ids().where(WithdrawalItem.invoice_id.in_(ids)).limit(1))
    seen_here = {i: seen[i] for i in ids if i in seen}
    if held is not None or await sweep_counts(session, ids) != seen_here:
        raise AlreadyClaimed(ids)
    refunding = await session.scalar(
        select(Invoice.id).where(Invoice.id.in_(ids), Invoice.id.in_(pending_refund_ids())).limit(1)
    )
    if refunding is not None:
        raise AlreadyClaimed(ids)
    paid_ids = [i.id for i in batch.invoices if i.status == InvoiceStatus.PAID]
    still_paid = await session.scalar(
        select(func.count())
        .select_from(Invoice)
        .where(
            Invoice.id.in_(paid_ids),
            Invoice.status == InvoiceStatus.PAID,
            Invoice.withdrawn.is_(False),
        )
    )
    if paid_ids and still_paid != len(paid_ids):
        raise AlreadyClaimed(paid_ids)
    amounts = {i: int(balances[i] or 0) for i in ids}
    withdrawal = Withdrawal(
        id=str(uuid.uuid4()),
        chain_id=row.chain_id,
        owner_address=batch.owner_address,
        token_address=batch.token_address,
        relayer_tx_id=row.id,
        status=WithdrawalStatus.PENDING,
        planned_raw=str(sum(amounts.values())),
        created_at=now_ms,
        updated_at=now_ms,
    )
    session.add(withdrawal)
    await session.flush()
    session.add_all(
        WithdrawalItem(withdrawal_id=withdrawal.id, invoice_id=i, amount_raw=str(amounts[i]))
        for i in ids
    )


async def withdrawal_summary(db: Database, tx_id: str) -> tuple[Withdrawal, int] | None:
    """The withdrawal a relayer transaction carries and how many escrows it sweeps."""
    async with db.sessions() as session:
        withdrawal = await session.scalar(
            select(Withdrawal).where(Withdrawal.relayer_tx_id == tx_id)
        )
        if withdrawal is None:
            return None
        count = await session.scalar(
            select(func.count())
            .select_from(WithdrawalItem)
            .where(WithdrawalItem.withdrawal_id == withdrawal.id)
        )
        return withdrawal, int(count or 0)
