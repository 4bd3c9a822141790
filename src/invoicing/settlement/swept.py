"""What a final withdrawal moved, applied to its invoices (the withdrawal's ``OnFinal``).

What a confirmed sweep moved is read from the factory's ``Withdrawn`` event and, per escrow,
from its balance after the sweep (read at the receipt's block) against the one planned: an
escrow that still holds its funds (a token that blocks it) is not marked withdrawn, and is
parked, so it is not swept again until its balance changes or its retry time comes. A sweep
mined reverted parks its escrows as a withdraw that does not simulate does (what the
simulation saw can differ from what the block held). Every sweep also reads the escrows'
other assets at that block (``settlement.assets``). A sweep that moved more of an invoice's
token than the monitor last saw in its escrow (a transfer after it was paid) queues a scan
of the escrow's blocks since that reading, so those transfers become payments of record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing import metrics
from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.events import decode_withdrawn, native_credits
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database
from invoicing.invoices.lifecycle import apply_step, on_withdrawal_confirmed
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.payments import queue_scans, scan_of
from invoicing.services import Services
from invoicing.settlement.assets import (
    Reading,
    after_sweep,
    asset_key,
    assets_after_sweep,
    record_readings,
)
from invoicing.settlement.finality import Final, OnFinal
from invoicing.settlement.parking import park, unpark
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    ParkKind,
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)

log = logging.getLogger(__name__)


def swept_by_event(receipt: dict[str, Any], factory: str, token: str | None) -> tuple[int, int]:
    """(total, fee) of ``token`` in the receipt's Withdrawn events from the factory."""
    wanted = (token or ZERO_ADDRESS).lower()
    total = fee = 0
    for entry in receipt.get("logs", []):
        if str(entry.get("address", "")).lower() != factory.lower():
            continue
        event = decode_withdrawn(entry)
        if event is not None and event.token.lower() == wanted:
            total += event.total
            fee += event.fee
    return total, fee


def log_credits(receipt: dict[str, Any], factory: str, chain_id: int) -> None:
    """One line per native credit in a confirmed sweep or refund: the account refused the
    coin (or needed more than the send's gas stipend); anyone may deliver it."""
    for account, amount in native_credits(receipt, factory):
        log.warning(
            "chain %s: %s refused %s wei of native coin; factory %s holds it for it "
            "(nativeCreditOf; claimNativeCredit(%s) delivers it, or the owner's next sweep)",
            chain_id,
            account,
            amount,
            factory,
            account,
        )


def moved_by_escrow(
    planned: dict[str, int], after: dict[str, int | None], event_total: int
) -> dict[str, int | None]:
    """What a confirmed sweep moved out of each escrow: its planned balance less what it still
    holds; 0 when it holds as much as before, or for all when the ``Withdrawn`` event reports
    nothing moved.
    An escrow whose balance after the sweep is unreadable moved its planned balance if the
    event's total covers it besides what the others moved, else it is unknown (None). A lone
    escrow moved what the event says (funds that arrived after planning included)."""
    moved: dict[str, int | None] = {}
    for invoice_id, before in planned.items():
        left = after.get(invoice_id)
        if event_total == 0:
            moved[invoice_id] = 0
        elif left is None:
            moved[invoice_id] = None
        elif left >= before:
            moved[invoice_id] = 0
        else:
            moved[invoice_id] = before - left
    unknown = [i for i, amount in moved.items() if amount is None]
    rest = event_total - sum(amount or 0 for amount in moved.values())
    if unknown and event_total > 0 and rest >= sum(planned[i] for i in unknown):
        moved.update({i: planned[i] for i in unknown})
    if len(planned) == 1:
        (only,) = planned
        if moved[only]:
            moved[only] = event_total
    return moved


async def balances_after_sweep(
    db: Database, chain: ChainGateway, tx_id: str, block: int
) -> dict[str, int | None]:
    """The balances of a withdrawal's escrows at the block that mined it (empty when the
    transaction carries no withdrawal)."""
    async with db.sessions() as session:
        withdrawal = await session.scalar(
            select(Withdrawal).where(Withdrawal.relayer_tx_id == tx_id)
        )
        if withdrawal is None:
            return {}
        invoices = list(
            await session.scalars(
                select(Invoice)
                .join(WithdrawalItem, WithdrawalItem.invoice_id == Invoice.id)
                .where(WithdrawalItem.withdrawal_id == withdrawal.id)
                .order_by(Invoice.id)
            )
        )
    # The escrows of one withdrawal share its token, whatever their invoices were priced in.
    values = await chain.balances(
        withdrawal.token_address, [i.payment_address for i in invoices], block
    )
    return {i.id: v for i, v in zip(invoices, values, strict=True)}


@dataclass(frozen=True)
class SweepReadings:
    """A confirmed withdrawal's escrows at the block that mined it: their balances of the
    swept asset (``after``) and their other assets (``others``)."""

    after: dict[str, int | None]
    others: Sequence[Reading]


async def read_sweep(
    services: Services, chain: ChainGateway, row: RelayerTransaction, block: int
) -> SweepReadings:
    after = await balances_after_sweep(services.db, chain, row.id, block)
    batch_size = services.settings.monitor_batch_size
    others = await assets_after_sweep(services.db, chain, row.id, block, batch_size)
    return SweepReadings(after, others)


async def settle_withdrawal(
    session: AsyncSession, services: Services, final: Final[SweepReadings]
) -> None:
    """Apply a final withdrawal transaction. Confirmed: each escrow whose funds moved counts
    as swept (a paid invoice completes, with its ``invoice.completed`` event); one that
    moved nothing is parked. Reverted: the invoices are released and their escrows parked.
    Dropped: the invoices are released for the next pass. The readings hold the escrows'
    balances after a confirmed sweep and their other assets at that block (recorded in
    ``escrow_assets``). A sweep of another asset than the invoice's own token changes only
    the escrow's asset rows."""
    row, receipt, now_ms = final.row, final.receipt, final.now_ms
    readings = final.readings or SweepReadings({}, ())
    after = readings.after
    withdrawal = await session.scalar(
        select(Withdrawal).where(Withdrawal.relayer_tx_id == row.id).with_for_update()
    )
    if withdrawal is None or withdrawal.status != WithdrawalStatus.PENDING:
        return
    withdrawal.updated_at = now_ms
    if receipt is None or receipt["status"] != 1:
        withdrawal.status = WithdrawalStatus.FAILED
        if receipt is not None:
            await _park_reverted(session, services, withdrawal, final)
        return
    total, fee = swept_by_event(receipt, final.factory, withdrawal.token_address)
    log_credits(receipt, final.factory, row.chain_id)
    withdrawal.status = WithdrawalStatus.COMPLETED
    withdrawal.confirmed_at = now_ms
    withdrawal.swept_raw = str(total)
    withdrawal.fee_raw = str(fee)
    items = {
        item.invoice_id: item
        for item in await session.scalars(
            select(WithdrawalItem).where(WithdrawalItem.withdrawal_id == withdrawal.id)
        )
    }
    moved = moved_by_escrow({i: int(item.amount_raw) for i, item in items.items()}, after, total)
    gas_used = int(receipt.get("gasUsed") or 0)
    metrics.withdrawal_confirmed(session.sync_session, row.chain_id, gas_used, len(items))
    invoices = await session.scalars(
        select(Invoice)
        .where(Invoice.id.in_(list(items)))
        .order_by(Invoice.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    swept = []
    completed = []
    scans = []
    own_token = asset_key(withdrawal.token_address)
    for invoice in invoices:
        amount = moved[invoice.id]
        items[invoice.id].moved_raw = None if amount is None else str(amount)
        if amount is None:
            continue  # unknown: the escrow is read again by a later pass
        if asset_key(invoice.token_address) != own_token:
            continue  # another asset of the escrow: its row holds what is left
        if amount > 0:
            invoice.swept_raw = str(int(invoice.swept_raw) + amount)
            if int(invoice.swept_raw) > int(invoice.balance_raw):
                scans.append(unseen_payments(invoice, int(receipt["blockNumber"])))
            events = apply_step(invoice, on_withdrawal_confirmed(invoice), now_ms)
            if events:
                completed.append(Occurrence(invoice, events))
            swept.append(invoice.id)
            continue
        left = after.get(invoice.id)
        if left is None:  # unreadable, but the event says nothing moved: as planned
            left = int(items[invoice.id].amount_raw)
        await park(
            session,
            services.db.dialect,
            services.settings,
            invoice,
            ParkKind.NO_EFFECT,
            f"the sweep moved nothing; the escrow still holds {left}",
            left,
            now_ms,
        )
    await unpark(session, swept)
    await record_events(session, services.settings, now_ms, completed)
    await queue_scans(session, services.db.dialect, scans)
    await after_sweep(session, withdrawal.token_address, after, now_ms)
    await record_readings(session, services.db.dialect, row.chain_id, readings.others, now_ms)


def unseen_payments(invoice: Invoice, block: int) -> dict[str, Any]:
    """The scan for transfers the monitor never saw (an over-payment or a late payment after
    the invoice was paid, which only the sweep moved): from the block after its last stored
    reading to the sweep's block (``monitor.records`` records them as payments of record)."""
    return scan_of(invoice.id, invoice.chain_id, invoice.balance_block, block, None)


async def _park_reverted(
    session: AsyncSession, services: Services, withdrawal: Withdrawal, final: Final[SweepReadings]
) -> None:
    """Park every escrow of a sweep that was mined reverted, with the balance it planned."""
    items = await session.execute(
        select(WithdrawalItem, Invoice)
        .join(Invoice, Invoice.id == WithdrawalItem.invoice_id)
        .where(WithdrawalItem.withdrawal_id == withdrawal.id)
        .order_by(Invoice.id)
    )
    reason = f"the mined sweep {final.row.mined_hash} reverted"
    for item, invoice in items:
        await park(
            session,
            services.db.dialect,
            services.settings,
            invoice,
            ParkKind.FAILING,
            reason,
            int(item.amount_raw),
            final.now_ms,
        )


SWEEP_FINAL = OnFinal(settle_withdrawal, read=read_sweep)
