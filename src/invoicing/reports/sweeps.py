"""What the confirmed sweeps of some invoices moved: each invoice's share of the sweeps'
fee and the latest sweep's transaction hash.

A sweep (``settlement.models.Withdrawal``) records the fee the factory's ``Withdrawn``
event reported for the whole batch (``settlement/swept.py``); an invoice's share is that
fee times what its escrow moved over what the sweep moved in all, rounded down: exact for
an invoice swept alone, within one raw unit of the factory's own per-escrow split
otherwise. Only sweeps of the invoice's own token count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)


@dataclass(frozen=True)
class Swept:
    fee_raw: int
    tx_hash: str  # the latest confirmed sweep's


async def sweeps_of(session: AsyncSession, invoices: Sequence[Invoice]) -> dict[str, Swept]:
    """By invoice row id, for those of ``invoices`` a confirmed sweep of their token moved."""
    if not invoices:
        return {}
    token_of = {invoice.id: invoice.token_address for invoice in invoices}
    rows = await session.execute(
        select(
            WithdrawalItem.invoice_id,
            func.coalesce(WithdrawalItem.moved_raw, WithdrawalItem.amount_raw),
            Withdrawal.token_address,
            Withdrawal.swept_raw,
            Withdrawal.fee_raw,
            func.coalesce(RelayerTransaction.mined_hash, RelayerTransaction.tx_hash),
        )
        .join(Withdrawal, Withdrawal.id == WithdrawalItem.withdrawal_id)
        .join(RelayerTransaction, RelayerTransaction.id == Withdrawal.relayer_tx_id)
        .where(
            WithdrawalItem.invoice_id.in_(sorted(token_of)),
            Withdrawal.status == WithdrawalStatus.COMPLETED,
        )
        .order_by(Withdrawal.confirmed_at, Withdrawal.id)
    )
    found: dict[str, Swept] = {}
    for invoice_pk, moved, token, swept, fee, tx_hash in rows:
        if token != token_of[invoice_pk]:
            continue
        whole = int(swept or 0)
        share = int(fee or 0) * int(moved) // whole if whole else 0
        before = found.get(invoice_pk)
        found[invoice_pk] = Swept((before.fee_raw if before else 0) + share, str(tx_hash))
    return found
