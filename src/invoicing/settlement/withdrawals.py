"""Batched withdrawals: sweep escrows to their owner through ``PaymentFactory.withdraw``.

What is swept, per (chain, owner, token):
- every paid invoice not yet withdrawn (deleted ones too): it becomes completed once the
  withdrawal transaction is confirmed;
- on full passes, escrows of settled invoices that hold funds again: completed (a payment
  after the sweep), cancelled, and expired once their late-payment window is over (until
  then a late full payment can still make the invoice paid, so its funds are left alone).

A pending withdrawal claims its invoices (``withdrawal_items``): no other batch takes them
until its transaction is final, so an escrow is never swept twice; a reverted or dropped
withdrawal releases them for the next pass.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.calldata import encode_withdraw
from invoicing.chain.events import decode_withdrawn
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.chain.rpc import ContractRevert
from invoicing.clock import Clock
from invoicing.db import Database
from invoicing.invoices.lifecycle import InvoiceStatus, apply_step, on_withdrawal_confirmed
from invoicing.invoices.models import Invoice
from invoicing.services import Services
from invoicing.settlement.models import (
    RelayerTransaction,
    TxPurpose,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)
from invoicing.settlement.relayer import TX_GAS_CAP, Call, Relayer

log = logging.getLogger(__name__)

# Gas per swept escrow is ~39k native / ~44k ERC-20 (DESIGN section 2); budgeting 60k each
# plus 200k of fixed cost keeps a full batch well under the 16,777,216 per-transaction cap.
MAX_ESCROWS_PER_TX = (TX_GAS_CAP - 200_000) // 60_000
MAX_CANDIDATES_PER_PASS = 10_000


class AlreadyClaimed(Exception):
    """Another process claimed some of the batch's invoices first."""


@dataclass(frozen=True)
class Batch:
    owner_address: str
    token_address: str | None
    invoices: list[Invoice]


def max_batch(batch_size: int) -> int:
    return max(1, min(batch_size, MAX_ESCROWS_PER_TX))


def _claimed_ids() -> Any:
    """Invoice ids held by a pending withdrawal."""
    return (
        select(WithdrawalItem.invoice_id)
        .join(Withdrawal, Withdrawal.id == WithdrawalItem.withdrawal_id)
        .where(Withdrawal.status == WithdrawalStatus.PENDING)
    )


async def paid_candidates(
    db: Database, chain_id: int, owner_key: str | None = None
) -> list[Invoice]:
    """Paid invoices waiting for their withdrawal (deleted ones included)."""
    conditions = [
        Invoice.chain_id == chain_id,
        Invoice.status == InvoiceStatus.PAID,
        Invoice.withdrawn.is_(False),
        Invoice.id.not_in(_claimed_ids()),
    ]
    if owner_key is not None:
        conditions.append(Invoice.owner_key == owner_key)
    async with db.sessions() as session:
        rows = await session.scalars(
            select(Invoice).where(*conditions).order_by(Invoice.id).limit(MAX_CANDIDATES_PER_PASS)
        )
        return list(rows)


async def settled_candidates(
    services: Services, chain: ChainGateway, now_ms: int, owner_key: str | None = None
) -> list[Invoice]:
    """Settled invoices whose escrow may have received funds since: read, then sweep."""
    window_ms = int(services.settings.late_payment_window_s * 1000)
    since = now_ms - window_ms
    conditions = [
        Invoice.chain_id == chain.config.chain_id,
        Invoice.id.not_in(_claimed_ids()),
        or_(
            and_(Invoice.status == InvoiceStatus.COMPLETED, Invoice.withdrawn_at >= since),
            and_(Invoice.status == InvoiceStatus.CANCELLED, Invoice.deleted_at >= since),
            and_(
                Invoice.status == InvoiceStatus.EXPIRED,
                Invoice.expires_at <= since,
                Invoice.expires_at >= since - window_ms,
            ),
        ),
    ]
    if owner_key is not None:
        conditions.append(Invoice.owner_key == owner_key)
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(Invoice).where(*conditions).order_by(Invoice.id).limit(MAX_CANDIDATES_PER_PASS)
        )
        invoices = list(rows)
    balances = await escrow_balances(chain, invoices)
    return [invoice for invoice in invoices if balances[invoice.id] > 0]


async def escrow_balances(chain: ChainGateway, invoices: Sequence[Invoice]) -> dict[str, int]:
    """Current balances by invoice id, one batched read per token."""
    by_token: dict[str | None, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_token[invoice.token_address].append(invoice)
    balances: dict[str, int] = {}
    for token, group in by_token.items():
        values = await chain.balances(token, [i.payment_address for i in group])
        # An unreadable balance (a token whose balanceOf fails) counts as nothing to sweep.
        balances.update({i.id: v or 0 for i, v in zip(group, values, strict=True)})
    return balances


def group_batches(invoices: Sequence[Invoice], size: int) -> list[Batch]:
    """Batches per (owner, token), each at most ``size`` escrows."""
    groups: dict[tuple[str, str | None], list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        token = invoice.token_address.lower() if invoice.token_address else None
        groups[(invoice.owner_key, token)].append(invoice)
    batches = []
    for group in groups.values():
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            first = chunk[0]
            batches.append(Batch(first.owner_address, first.token_address, chunk))
    return batches


async def plan_withdrawals(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    *,
    full: bool,
    owner_key: str | None = None,
) -> list[RelayerTransaction]:
    """Send the withdrawals that are due on ``chain`` from its relayer; returns their
    relayer transactions.

    A full pass sweeps every waiting paid invoice and settled escrows holding funds; other
    passes only send full batches (``withdrawal_batch_size`` paid invoices of one owner and
    token)."""
    settings = services.settings
    size = max_batch(settings.withdrawal_batch_size)
    started_ms = services.clock.now_ms()
    invoices = await paid_candidates(services.db, chain.config.chain_id, owner_key)
    if full:
        invoices += await settled_candidates(services, chain, started_ms, owner_key)
    batches = group_batches(invoices, size)
    if not full:
        batches = [b for b in batches if len(b.invoices) >= settings.withdrawal_batch_size]
    if batches and await relayer.balance_shortfall() is not None:
        return []  # the relayer is under its balance threshold: withdrawals wait (logged)
    sent = []
    for batch in batches:
        sent.extend(await send_batch(services, chain, relayer, batch))
    return sent


async def send_batch(
    services: Services, chain: ChainGateway, relayer: Relayer, batch: Batch
) -> list[RelayerTransaction]:
    """Simulate and send one withdraw; a batch over the gas cap is split in halves."""
    ids = [invoice.id for invoice in batch.invoices]
    async with services.db.sessions() as session:
        seen = await sweep_counts(session, ids)
    balances = await escrow_balances(chain, batch.invoices)
    # A settled escrow emptied since it was scanned (by another process) is left out.
    invoices = [i for i in batch.invoices if i.status == InvoiceStatus.PAID or balances[i.id] > 0]
    if not invoices:
        return []
    token = batch.token_address or ZERO_ADDRESS
    salts = [bytes.fromhex(i.salt[2:]) for i in invoices]
    call = Call(
        TxPurpose.WITHDRAW, chain.factory, encode_withdraw(batch.owner_address, token, salts)
    )
    gas = await simulate(relayer, call, batch.owner_address)
    if gas is None:
        return []
    if gas >= TX_GAS_CAP and len(invoices) > 1:
        half = len(invoices) // 2
        first = Batch(batch.owner_address, batch.token_address, invoices[:half])
        rest = Batch(batch.owner_address, batch.token_address, invoices[half:])
        return [
            *await send_batch(services, chain, relayer, first),
            *await send_batch(services, chain, relayer, rest),
        ]
    planned = Batch(batch.owner_address, batch.token_address, invoices)

    async def claim(session: AsyncSession, row: RelayerTransaction) -> None:
        await claim_invoices(session, services.clock, planned, balances, seen, row)

    try:
        return [await relayer.send(call, gas, claim)]
    except AlreadyClaimed:
        log.info("withdrawal batch for %s was claimed by another process", batch.owner_address)
        return []


async def simulate(relayer: Relayer, call: Call, owner_address: str) -> int | None:
    """The gas limit of a withdraw, or None when it reverts (logged; the batch is skipped)."""
    try:
        return await relayer.simulate(call)
    except ContractRevert as exc:
        log.warning(
            "withdrawal for %s on chain %s does not simulate (%s); skipped",
            owner_address,
            relayer.chain_id,
            revert_name(exc.revert_data) or exc.message,
        )
        return None


async def sweep_counts(session: AsyncSession, ids: list[str]) -> dict[str, int]:
    """How many withdrawals (any status) each invoice has been part of."""
    rows = await session.execute(
        select(WithdrawalItem.invoice_id, func.count())
        .where(WithdrawalItem.invoice_id.in_(ids))
        .group_by(WithdrawalItem.invoice_id)
    )
    return {invoice_id: int(count) for invoice_id, count in rows}


async def claim_invoices(
    session: AsyncSession,
    clock: Clock,
    batch: Batch,
    balances: dict[str, int],
    seen: dict[str, int],
    row: RelayerTransaction,
) -> None:
    """Record the withdrawal and its items, unless another batch took an invoice since this
    one read the balances. Runs under the relayer account lock, which every batch of this
    chain passes through, so two processes cannot both pass this check."""
    ids = [invoice.id for invoice in batch.invoices]
    held = await session.scalar(_claimed_ids().where(WithdrawalItem.invoice_id.in_(ids)).limit(1))
    if held is not None or await sweep_counts(session, ids) != seen:
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
    now_ms = clock.now_ms()
    withdrawal = Withdrawal(
        id=str(uuid.uuid4()),
        chain_id=row.chain_id,
        owner_address=batch.owner_address,
        token_address=batch.token_address,
        relayer_tx_id=row.id,
        status=WithdrawalStatus.PENDING,
        planned_raw=str(sum(balances[i] for i in ids)),
        created_at=now_ms,
        updated_at=now_ms,
    )
    session.add(withdrawal)
    await session.flush()
    session.add_all(
        WithdrawalItem(withdrawal_id=withdrawal.id, invoice_id=i, amount_raw=str(balances[i]))
        for i in ids
    )


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


async def settle_withdrawal(
    session: AsyncSession,
    factory: str,
    row: RelayerTransaction,
    receipt: dict[str, Any] | None,
    now_ms: int,
) -> None:
    """Apply a final withdrawal transaction: confirmed → invoices completed; reverted or
    dropped → the invoices are released for the next pass."""
    withdrawal = await session.scalar(
        select(Withdrawal).where(Withdrawal.relayer_tx_id == row.id).with_for_update()
    )
    if withdrawal is None or withdrawal.status != WithdrawalStatus.PENDING:
        return
    withdrawal.updated_at = now_ms
    if receipt is None or receipt["status"] != 1:
        withdrawal.status = WithdrawalStatus.FAILED
        return
    total, fee = swept_by_event(receipt, factory, withdrawal.token_address)
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
    invoices = await session.scalars(
        select(Invoice)
        .where(Invoice.id.in_(list(items)))
        .order_by(Invoice.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    for invoice in invoices:
        invoice.swept_raw = str(int(invoice.swept_raw) + int(items[invoice.id].amount_raw))
        apply_step(invoice, on_withdrawal_confirmed(invoice), now_ms)


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
