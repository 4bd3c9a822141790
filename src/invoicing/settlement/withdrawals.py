"""Batched withdrawals: sweep escrows to their owner through ``PaymentFactory.withdraw``.

What is swept, per (chain, owner, token):
- every paid invoice not yet withdrawn (deleted ones too): it becomes completed once a
  confirmed withdrawal has moved its funds;
- on full passes, escrows of settled invoices that hold funds again: completed (a payment
  after the sweep), cancelled, and expired once their late-payment window is over (until
  then a late full payment can still make the invoice paid, so its funds are left alone).

Only escrows whose balance is known and not zero are swept, and parked ones only when due
(``settlement.parking``). A batch whose withdraw does not simulate is split in halves, down
to single escrows; a single escrow that still fails is parked with the reason while the rest
of the batch goes on. What a confirmed sweep moved is read from the factory's ``Withdrawn``
event and, per escrow, from its balance after the sweep (read at the receipt's block)
against the one planned: an escrow that still holds its funds (a token that blocks it) is not
marked withdrawn, and is parked, so it is not swept again until its balance changes or its
retry time comes. An RPC error fails one batch (or, for an unreachable node, the pass on
that chain), never the others.

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

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing import metrics
from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.calldata import encode_withdraw
from invoicing.chain.events import decode_withdrawn
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.chain.rpc import ContractRevert, RpcError
from invoicing.db import Database
from invoicing.invoices.lifecycle import InvoiceStatus, apply_step, on_withdrawal_confirmed
from invoicing.invoices.models import Invoice
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.refunds.models import pending_refund_ids
from invoicing.services import Services
from invoicing.settlement.assets import (
    Reading,
    after_sweep,
    asset_key,
    mark_attempted,
    own_funds_ids,
    record_readings,
)
from invoicing.settlement.backoff import REQUEST_ERRORS, Backoff
from invoicing.settlement.models import (
    ParkedEscrow,
    ParkKind,
    RelayerTransaction,
    TxPurpose,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)
from invoicing.settlement.parking import is_due, park, parked_of, unpark
from invoicing.settlement.relayer import TX_GAS_CAP, Call, Relayer

log = logging.getLogger(__name__)

# Gas per swept escrow is ~39k native / ~44k ERC-20 (DESIGN section 2); budgeting 60k each
# plus 200k of fixed cost keeps a full batch well under the 16,777,216 per-transaction cap.
MAX_ESCROWS_PER_TX = (TX_GAS_CAP - 200_000) // 60_000
MAX_CANDIDATES_PER_PASS = 10_000
_EMPTY = "the escrow holds nothing to sweep (swept outside this service?)"


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


def _not_refunding() -> ColumnElement[bool]:
    """An escrow with a refund in flight is not swept (a refund and a sweep never race);
    the refund's own check refuses while a sweep is pending (``refunds.service``)."""
    return Invoice.id.not_in(pending_refund_ids())


def _waiting_ids(now_ms: int) -> Any:
    """Invoice ids of parked escrows whose retry time has not come."""
    return select(ParkedEscrow.invoice_id).where(ParkedEscrow.next_retry_at > now_ms)


def _paid() -> ColumnElement[bool]:
    return and_(Invoice.status == InvoiceStatus.PAID, Invoice.withdrawn.is_(False))


def _settled(now_ms: int, window_ms: int) -> ColumnElement[bool]:
    """Settled invoices whose escrow may have received funds since: read, then sweep. After
    these windows, the monitor's lifetime pass finds their funds (``settlement.assets``)."""
    since = now_ms - window_ms
    return or_(
        and_(Invoice.status == InvoiceStatus.COMPLETED, Invoice.withdrawn_at >= since),
        and_(Invoice.status == InvoiceStatus.CANCELLED, Invoice.deleted_at >= since),
        and_(
            Invoice.status == InvoiceStatus.EXPIRED,
            Invoice.expires_at <= since,
            Invoice.expires_at >= since - window_ms,
        ),
        and_(settled_for_good(now_ms, window_ms), Invoice.id.in_(own_funds_ids())),
    )


def settled_for_good(now_ms: int, window_ms: int) -> ColumnElement[bool]:
    """Invoices no payment can change any more: completed, cancelled, or expired with their
    late-payment window over. Any asset found in their escrows is swept to the owner."""
    return or_(
        Invoice.status.in_([InvoiceStatus.COMPLETED, InvoiceStatus.CANCELLED]),
        and_(Invoice.status == InvoiceStatus.EXPIRED, Invoice.expires_at < now_ms - window_ms),
    )


async def candidates(
    db: Database, chain_id: int, condition: ColumnElement[bool], owner_key: str | None = None
) -> list[Invoice]:
    """Invoices of ``chain_id`` meeting ``condition`` that no pending withdrawal holds."""
    conditions = [
        Invoice.chain_id == chain_id,
        condition,
        Invoice.id.not_in(_claimed_ids()),
        _not_refunding(),
    ]
    if owner_key is not None:
        conditions.append(Invoice.owner_key == owner_key)
    async with db.sessions() as session:
        rows = await session.scalars(
            select(Invoice).where(*conditions).order_by(Invoice.id).limit(MAX_CANDIDATES_PER_PASS)
        )
        return list(rows)


async def paid_candidates(
    db: Database, chain_id: int, now_ms: int, owner_key: str | None = None
) -> list[Invoice]:
    """Paid invoices waiting for their withdrawal (deleted ones included), parked ones only
    once their retry time has come."""
    return await candidates(
        db, chain_id, and_(_paid(), Invoice.id.not_in(_waiting_ids(now_ms))), owner_key
    )


async def settled_candidates(
    services: Services, chain_id: int, now_ms: int, owner_key: str | None = None
) -> list[Invoice]:
    """Settled invoices whose escrows are read (and swept when they hold funds)."""
    window_ms = int(services.settings.late_payment_window_s * 1000)
    condition = and_(_settled(now_ms, window_ms), Invoice.id.not_in(_waiting_ids(now_ms)))
    return await candidates(services.db, chain_id, condition, owner_key)


async def waiting_candidates(
    services: Services, chain_id: int, now_ms: int, owner_key: str | None = None
) -> list[Invoice]:
    """Parked escrows before their retry time: swept only if their balance changed."""
    window_ms = int(services.settings.late_payment_window_s * 1000)
    condition = and_(
        or_(_paid(), _settled(now_ms, window_ms)), Invoice.id.in_(_waiting_ids(now_ms))
    )
    return await candidates(services.db, chain_id, condition, owner_key)


async def escrow_balances(
    chain: ChainGateway, invoices: Sequence[Invoice], block: int | str = "latest"
) -> dict[str, int | None]:
    """Balances by invoice id, one batched read per token; None where it is unreadable."""
    by_token: dict[str | None, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_token[invoice.token_address].append(invoice)
    balances: dict[str, int | None] = {}
    for token, group in by_token.items():
        values = await chain.balances(token, [i.payment_address for i in group], block)
        balances.update({i.id: v for i, v in zip(group, values, strict=True)})
    return balances


def _group(invoices: Sequence[Invoice]) -> list[list[Invoice]]:
    groups: dict[tuple[str, str | None], list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        token = invoice.token_address.lower() if invoice.token_address else None
        groups[(invoice.owner_key, token)].append(invoice)
    return list(groups.values())


def group_batches(invoices: Sequence[Invoice], size: int) -> list[Batch]:
    """Batches per (owner, token), each at most ``size`` escrows."""
    batches = []
    for group in _group(invoices):
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            first = chunk[0]
            batches.append(Batch(first.owner_address, first.token_address, chunk))
    return batches


@dataclass(frozen=True)
class Planning:
    """One pass on one chain, and what it read before sending anything: how many
    withdrawals each candidate has been part of, the balances, the parked escrows."""

    services: Services
    chain: ChainGateway
    relayer: Relayer
    now_ms: int
    seen: dict[str, int]
    balances: dict[str, int | None]
    parked: dict[str, ParkedEscrow]
    # Set when the pass sweeps another asset found in the escrows (``settlement.stranded``):
    # its asset key. Such an escrow that fails alone is not parked (the invoice's own sweeps
    # go on) but waits for the asset's next read.
    other_asset: str | None = None

    def is_due(self, invoice_id: str) -> bool:
        return is_due(self.balances[invoice_id], self.parked.get(invoice_id), self.now_ms)

    def stale_paid(self, invoices: Sequence[Invoice]) -> list[tuple[Invoice, str, str]]:
        """Paid invoices whose escrow is empty (swept outside this service) or unreadable,
        not parked or due again: parked, so passes stop reading them until they are due."""
        stale = []
        for invoice in invoices:
            balance = self.balances[invoice.id]
            parked = self.parked.get(invoice.id)
            if invoice.status != InvoiceStatus.PAID or (balance is not None and balance > 0):
                continue
            if parked is not None and self.now_ms < parked.next_retry_at:
                continue
            reason = "its balance is unreadable" if balance is None else _EMPTY
            stale.append((invoice, ParkKind.NO_EFFECT, reason))
        return stale

    def seen_of(self, ids: Sequence[str]) -> dict[str, int]:
        return {i: self.seen[i] for i in ids if i in self.seen}


async def plan_withdrawals(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    *,
    full: bool,
    owner_key: str | None = None,
    backoff: Backoff | None = None,
) -> list[RelayerTransaction]:
    """Send the withdrawals that are due on ``chain`` from its relayer; returns their
    relayer transactions.

    A full pass sweeps every waiting paid invoice and settled escrows holding funds; other
    passes only send full batches (``withdrawal_batch_size`` paid invoices of one owner and
    token). A batch that failed on an RPC error waits as ``backoff`` says (one per worker)."""
    settings = services.settings
    size = max_batch(settings.withdrawal_batch_size)
    now_ms = services.clock.now_ms()
    chain_id = chain.config.chain_id
    invoices = await paid_candidates(services.db, chain_id, now_ms, owner_key)
    if full:
        invoices += await settled_candidates(services, chain_id, now_ms, owner_key)
        invoices += await waiting_candidates(services, chain_id, now_ms, owner_key)
    else:
        full_size = settings.withdrawal_batch_size
        invoices = [i for g in _group(invoices) if len(g) >= full_size for i in g]
    if not invoices:
        return []
    planning = await read_planning(services, chain, relayer, invoices, now_ms)
    due = [i for i in invoices if planning.is_due(i.id)]
    if stale := planning.stale_paid(invoices):
        await park_escrows(planning, stale)
    batches = group_batches(due, size)
    if not full:
        batches = [b for b in batches if len(b.invoices) >= settings.withdrawal_batch_size]
    if batches and await relayer.balance_shortfall() is not None:
        return []  # the relayer is under its balance threshold: withdrawals wait (logged)
    if backoff is None:
        backoff = Backoff(settings.settlement_poll_interval_s, settings.settlement_backoff_max_s)
    sent = []
    for batch in batches:
        sent.extend(await sweep_with_backoff(planning, batch, backoff))
    return sent


async def read_planning(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    invoices: Sequence[Invoice],
    now_ms: int,
) -> Planning:
    ids = [invoice.id for invoice in invoices]
    # Counted before the balances are read: a claim checks nothing was swept in between.
    async with services.db.sessions() as session:
        seen = await sweep_counts(session, ids)
        parked = await parked_of(session, ids)
    balances = await escrow_balances(chain, invoices)
    return Planning(services, chain, relayer, now_ms, seen, balances, parked)


async def sweep_with_backoff(
    planning: Planning, batch: Batch, backoff: Backoff
) -> list[RelayerTransaction]:
    """Sweep one batch; an RPC error fails it alone, and it waits before its next try."""
    key = (batch.owner_address.lower(), (batch.token_address or ZERO_ADDRESS).lower())
    if not backoff.ready(key, planning.now_ms):
        return []
    try:
        sent = await sweep_batch(planning, batch)
    except REQUEST_ERRORS as exc:
        delay_s = backoff.failed(key, planning.now_ms)
        log.warning(
            "withdrawal of %s escrow(s) of %s on chain %s failed (%s); retrying in %.1f s",
            len(batch.invoices),
            batch.owner_address,
            planning.relayer.chain_id,
            exc,
            delay_s,
        )
        return []
    backoff.succeeded(key)
    return sent


async def sweep_batch(planning: Planning, batch: Batch) -> list[RelayerTransaction]:
    """Simulate and send one withdraw. A batch that does not simulate, or needs more than
    the per-transaction gas cap, is split in halves; a single escrow that fails is parked."""
    token = batch.token_address or ZERO_ADDRESS
    salts = [bytes.fromhex(i.salt[2:]) for i in batch.invoices]
    call = Call(
        TxPurpose.WITHDRAW,
        planning.chain.factory,
        encode_withdraw(batch.owner_address, token, salts),
    )
    try:
        gas = await planning.relayer.simulate(call)
    except RpcError as exc:
        if not fails_in_execution(exc):
            raise
        return await split_or_park(planning, batch, failure_reason(exc))
    if gas >= TX_GAS_CAP:
        return await split_or_park(planning, batch, "needs more gas than a transaction may use")
    return await send_batch(planning, batch, call, gas)


def fails_in_execution(exc: RpcError) -> bool:
    """Whether a failed simulation is the call's own failure (a revert, out of gas), as
    opposed to the node's trouble (rate limits, a relayer without funds…)."""
    message = exc.message.lower()
    return isinstance(exc, ContractRevert) or "out of gas" in message or "gas required" in message


def failure_reason(exc: RpcError) -> str:
    """What an operator reads about a failed simulation (node text kept short)."""
    if isinstance(exc, ContractRevert):
        name = revert_name(exc.revert_data)
        if name is not None:
            return f"withdraw reverts with {name}"
        if exc.revert_data:
            return f"withdraw reverts with 0x{exc.revert_data[:36].hex()}"
        return f"withdraw reverts: {exc.message[:200]}"
    return f"withdraw fails: {exc.message[:200]}"


async def split_or_park(planning: Planning, batch: Batch, reason: str) -> list[RelayerTransaction]:
    if len(batch.invoices) == 1:
        if planning.other_asset is not None:
            await _set_aside(planning, batch.invoices[0], reason)
        else:
            await park_escrows(planning, [(batch.invoices[0], ParkKind.FAILING, reason)])
        return []
    log.info(
        "withdrawal of %s escrow(s) of %s on chain %s: %s; splitting it",
        len(batch.invoices),
        batch.owner_address,
        planning.relayer.chain_id,
        reason,
    )
    half = len(batch.invoices) // 2
    first = Batch(batch.owner_address, batch.token_address, batch.invoices[:half])
    rest = Batch(batch.owner_address, batch.token_address, batch.invoices[half:])
    return [*await sweep_batch(planning, first), *await sweep_batch(planning, rest)]


async def _set_aside(planning: Planning, invoice: Invoice, reason: str) -> None:
    assert planning.other_asset is not None
    log.warning(
        "withdrawals on chain %s: asset %s of escrow %s (invoice %s) cannot be swept (%s); "
        "tried again once the lifetime pass reads it again",
        invoice.chain_id,
        planning.other_asset,
        invoice.payment_address,
        invoice.id,
        reason,
    )
    async with planning.services.db.transaction() as session:
        now_ms = planning.services.clock.now_ms()
        await mark_attempted(session, invoice.id, planning.other_asset, now_ms)


async def park_escrows(planning: Planning, parks: Sequence[tuple[Invoice, str, str]]) -> None:
    """Park escrows, each (invoice, ``ParkKind``, reason), in one transaction; one that
    another process swept, claimed or parked since this pass read it is left alone."""
    services = planning.services
    ids = [invoice.id for invoice, _, _ in parks]
    async with services.db.transaction() as session:
        held = set(await session.scalars(_claimed_ids().where(WithdrawalItem.invoice_id.in_(ids))))
        counts = await sweep_counts(session, ids)
        for invoice, kind, reason in parks:
            if invoice.id in held or counts.get(invoice.id) != planning.seen.get(invoice.id):
                continue
            await park(
                session,
                services.db.dialect,
                services.settings,
                invoice,
                kind,
                reason,
                planning.balances[invoice.id] or 0,
                planning.now_ms,
                seen=planning.parked.get(invoice.id),
            )


async def send_batch(
    planning: Planning, batch: Batch, call: Call, gas: int
) -> list[RelayerTransaction]:
    """Send a simulated withdraw, claiming its invoices as the transaction is recorded."""

    async def claim(session: AsyncSession, row: RelayerTransaction) -> None:
        await claim_invoices(session, planning, batch, row)

    try:
        return [await planning.relayer.send(call, gas, claim)]
    except AlreadyClaimed:
        log.info("withdrawal batch for %s was claimed by another process", batch.owner_address)
        return []


async def sweep_counts(session: AsyncSession, ids: list[str]) -> dict[str, int]:
    """How many withdrawals (any status) each invoice has been part of."""
    rows = await session.execute(
        select(WithdrawalItem.invoice_id, func.count())
        .where(WithdrawalItem.invoice_id.in_(ids))
        .group_by(WithdrawalItem.invoice_id)
    )
    return {invoice_id: int(count) for invoice_id, count in rows}


async def claim_invoices(
    session: AsyncSession, planning: Planning, batch: Batch, row: RelayerTransaction
) -> None:
    """Record the withdrawal and its items, unless another batch took an invoice since this
    one read the balances. Runs under the relayer account lock, which every batch of this
    chain passes through, so two processes cannot both pass this check."""
    ids = [invoice.id for invoice in batch.invoices]
    held = await session.scalar(_claimed_ids().where(WithdrawalItem.invoice_id.in_(ids)).limit(1))
    if held is not None or await sweep_counts(session, ids) != planning.seen_of(ids):
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
    balances = {i: int(planning.balances[i] or 0) for i in ids}
    now_ms = planning.services.clock.now_ms()
    withdrawal = Withdrawal(
        id=str(uuid.uuid4()),
        chain_id=row.chain_id,
        owner_address=batch.owner_address,
        token_address=batch.token_address,
        relayer_tx_id=row.id,
        status=WithdrawalStatus.PENDING,
        planned_raw=str(sum(balances.values())),
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


async def settle_withdrawal(
    session: AsyncSession,
    services: Services,
    factory: str,
    row: RelayerTransaction,
    receipt: dict[str, Any] | None,
    after: dict[str, int | None],
    now_ms: int,
    others: Sequence[Reading] = (),
) -> None:
    """Apply a final withdrawal transaction. Confirmed: each escrow whose funds moved counts
    as swept (a paid invoice completes, with its ``invoice.completed`` event); one that
    moved nothing is parked. Reverted or dropped: the invoices are released for the next
    pass. ``after`` holds the escrows' balances after a confirmed sweep, ``others`` their
    other assets at that block (recorded in ``escrow_assets``). A sweep of another asset
    than the invoice's own token changes only the escrow's asset rows."""
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
    await after_sweep(session, withdrawal.token_address, after, now_ms)
    await record_readings(session, services.db.dialect, row.chain_id, others, now_ms)


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
