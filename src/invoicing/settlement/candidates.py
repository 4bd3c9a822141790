"""What the withdrawals sweep, and in which batches.

Per (chain, owner, token):
- every paid invoice not yet withdrawn (deleted ones too): it becomes completed once a
  confirmed withdrawal has moved its funds;
- on full passes, escrows of settled invoices that hold funds again: completed (a payment
  after the sweep), cancelled, and expired once their late-payment window is over (until
  then a late full payment can still make the invoice paid, so its funds are left alone).

A manual-capture invoice is not swept while it waits for its capture, and a voided one is
never swept, nor anything that reaches its escrow later: its owner may refund that
(``invoices.capture``).

No invoice that a pending withdrawal claims (``withdrawal_items``) or a refund in flight
holds is a candidate. Parked escrows wait for their retry time (``settlement.parking``).

The refunds table (``tables.refunds``) gives the refunds in flight that hold their escrows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select

from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database
from invoicing.invoices.lifecycle import Capture, InvoiceStatus
from invoicing.services import Services
from invoicing.settlement.assets import own_funds_ids
from invoicing.settlement.gas import TX_GAS_CAP
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import pending_refund_ids
from invoicing.tables.settlement import (
    ParkedEscrow,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)

# Gas per swept escrow is ~39k native / ~44k ERC-20 (``bench/gas.py``); budgeting 60k each
# plus 200k of fixed cost keeps a full batch well under the 16,777,216 per-transaction cap.
MAX_ESCROWS_PER_TX = (TX_GAS_CAP - 200_000) // 60_000
MAX_CANDIDATES_PER_PASS = 10_000


@dataclass(frozen=True)
class Batch:
    """Escrows of one owner and token that one factory made (``chain.versions``): one
    withdraw of that factory sweeps them."""

    owner_address: str
    token_address: str | None
    invoices: list[Invoice]
    factory: str
    # Every escrow is a paid invoice's, swept for the first time: the sweep may take the
    # owner's share of the relayer's budget further (``settlement.budget.sweep_spender``).
    paid: bool = False

    def part(self, invoices: list[Invoice]) -> Batch:
        """The same owner, token and factory with only ``invoices``."""
        return Batch(self.owner_address, self.token_address, invoices, self.factory, self.paid)


def invoice_factory(chain: ChainGateway, invoice: Invoice) -> str:
    """The factory that made ``invoice``'s escrow: the one that sweeps and refunds it."""
    salt = bytes.fromhex(invoice.salt[2:])
    return chain.factory_of(invoice.owner_address, salt, invoice.payment_address)


def max_batch(batch_size: int) -> int:
    return max(1, min(batch_size, MAX_ESCROWS_PER_TX))


def claimed_ids() -> Any:
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
    return and_(
        Invoice.status == InvoiceStatus.PAID,
        Invoice.withdrawn.is_(False),
        or_(Invoice.capture == Capture.AUTOMATIC, Invoice.captured_at.is_not(None)),
    )


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
    late-payment window over. Any asset found in their escrows is swept to the owner, but
    for a voided invoice's."""
    return and_(
        or_(
            Invoice.status.in_([InvoiceStatus.COMPLETED, InvoiceStatus.CANCELLED]),
            and_(Invoice.status == InvoiceStatus.EXPIRED, Invoice.expires_at < now_ms - window_ms),
        ),
        Invoice.voided_at.is_(None),
    )


async def candidates(
    db: Database, chain_id: int, condition: ColumnElement[bool], owner_key: str | None = None
) -> list[Invoice]:
    """Invoices of ``chain_id`` meeting ``condition`` that no pending withdrawal holds."""
    conditions = [
        Invoice.chain_id == chain_id,
        condition,
        Invoice.voided_at.is_(None),
        Invoice.id.not_in(claimed_ids()),
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


def by_owner_and_token(invoices: Sequence[Invoice]) -> list[list[Invoice]]:
    groups: dict[tuple[str, str | None], list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        token = invoice.token_address.lower() if invoice.token_address else None
        groups[(invoice.owner_key, token)].append(invoice)
    return list(groups.values())


def group_batches(chain: ChainGateway, invoices: Sequence[Invoice], size: int) -> list[Batch]:
    """Batches per (owner, token, factory), each at most ``size`` escrows; paid invoices'
    first sweeps apart from other escrows' (they spend the owner's budget differently, so a
    stranger's dust in settled escrows never holds a paid invoice's sweep)."""
    paid = [invoice for invoice in invoices if invoice.status == InvoiceStatus.PAID]
    others = [invoice for invoice in invoices if invoice.status != InvoiceStatus.PAID]
    return [
        batch
        for part, is_paid in ((paid, True), (others, False))
        for group in by_owner_and_token(part)
        for batch in batches_of(chain, group, group[0].token_address, size, paid=is_paid)
    ]


def batches_of(
    chain: ChainGateway,
    invoices: Sequence[Invoice],
    token: str | None,
    size: int,
    *,
    paid: bool = False,
) -> list[Batch]:
    """Batches sweeping ``token`` from the escrows of ``invoices`` (of one owner), per
    factory, each at most ``size`` escrows."""
    by_factory: dict[str, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_factory[invoice_factory(chain, invoice)].append(invoice)
    return [
        Batch(group[0].owner_address, token, group[start : start + size], factory, paid)
        for factory, group in by_factory.items()
        for start in range(0, len(group), size)
    ]
