"""What the relayer may spend in a UTC day, and the owners it sets aside.

Every transaction the relayer records (a sweep, a SetFee or SetPayout, a refund) is charged,
when it is recorded and under the chain's relayer account lock, to two counts of the day:

- the chain's: at most ``relayer_chain_tx_per_day`` transactions and
  ``relayer_chain_gas_per_day`` gas (gas limits: the most the transactions can burn);
- its share's: at most ``relayer_owner_tx_per_day`` transactions and
  ``relayer_owner_gas_per_day`` gas. The share is the owner's own once the owner has an
  invoice paid on the chain; every owner without one (a wallet that only signs requests)
  spends from one share, ``NEWCOMERS``, so fresh wallets cannot multiply a share.
  A sweep of paid invoices (their first; :func:`sweep_spender`) may take the owner's share
  further: each of the owner's invoices paid on the chain in the last 24 hours adds one
  transaction and ``relayer_sweep_gas_per_paid_invoice`` gas, so a busy merchant's sweeps
  keep pace with its sales. Every other transaction (sweeps of settled escrows, where a
  stranger's dust lands; signed requests; gasless payments) stays within the base share.

A transaction over either count is not recorded (``BudgetExhausted``, 429 ``rate_limited``
until the next UTC day for a relayed request; a sweep waits). A replacement re-signs a
recorded transaction under the same gas limit and is not charged again.

An owner whose relayed transaction reverts on-chain is set aside on that chain: nothing is
relayed for it before ``relayer_owner_revert_retry_s`` has passed, doubled at each further
revert in a row up to ``relayer_owner_revert_retry_max_s`` (``OwnerSetAside``); a confirmed
transaction of the owner ends it.

The most the relayer can spend is then, per chain and UTC day, ``relayer_chain_gas_per_day``
gas at the chain's ``max_fee_per_gas``, and per owner (or all newcomers together)
``relayer_owner_gas_per_day`` gas at that fee, plus for sweeps of its paid invoices
``relayer_sweep_gas_per_paid_invoice`` per invoice paid, each paid by a payment transaction
the payer sent (docs/security.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database, upsert
from invoicing.errors import RateLimited
from invoicing.settings import Settings
from invoicing.settlement.backoff import retry_delay_s
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    OwnerSetAside,
    RelayerSpend,
    RelayerTransaction,
    TxPurpose,
    TxStatus,
)

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
CHAIN_SHARE = "*"
NEWCOMERS = "newcomers"
# No transaction uses less: a check before the estimate asks for room for at least this.
TX_GAS_MIN = 21_000


@dataclass(frozen=True)
class Limits:
    """The relayer's daily budget on each chain and the set-aside delays (from settings)."""

    chain_tx_per_day: int
    chain_gas_per_day: int
    owner_tx_per_day: int
    owner_gas_per_day: int
    revert_retry_s: float
    revert_retry_max_s: float
    sweep_gas_per_paid_invoice: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.relayer_chain_tx_per_day,
            settings.relayer_chain_gas_per_day,
            settings.relayer_owner_tx_per_day,
            settings.relayer_owner_gas_per_day,
            settings.relayer_owner_revert_retry_s,
            settings.relayer_owner_revert_retry_max_s,
            settings.relayer_sweep_gas_per_paid_invoice,
        )


@dataclass(frozen=True)
class Spender:
    """Who a transaction is sent for: the owner (lowercased; the one set aside when it
    reverts), the share of the budget it spends (the owner's, or ``NEWCOMERS``), and how far
    beyond the share's base this transaction may take it (a sweep of paid invoices:
    :func:`sweep_spender`)."""

    owner_key: str
    share_key: str
    extra_tx: int = 0
    extra_gas: int = 0

    @classmethod
    def owner(cls, address: str) -> Spender:
        """An owner who spends its own share (one with an invoice paid on the chain)."""
        return cls(address.lower(), address.lower())


class BudgetExhausted(RateLimited):
    """The chain's or the share's budget of the day is used up."""


class SetAside(RateLimited):
    """The owner's relayed transactions reverted on-chain; it waits until its retry time."""


async def spender_of(session: AsyncSession, chain_id: int, owner_address: str) -> Spender:
    """The spender of a request an owner signed: its own share once it has an invoice paid
    on the chain, the newcomers' share before."""
    owner_key = owner_address.lower()
    paid = await session.scalar(
        select(Invoice.id)
        .where(Invoice.owner_key == owner_key, Invoice.chain_id == chain_id, Invoice.paid)
        .limit(1)
    )
    return Spender(owner_key, owner_key if paid is not None else NEWCOMERS)


async def sweep_spender(
    session: AsyncSession, limits: Limits, chain_id: int, owner_address: str, now_ms: int
) -> Spender:
    """The spender of a sweep of paid invoices: the owner's share, raised by one transaction
    and ``sweep_gas_per_paid_invoice`` gas for each of its invoices paid on the chain in the
    last 24 hours (none when that setting is 0)."""
    owner = Spender.owner(owner_address)
    if limits.sweep_gas_per_paid_invoice == 0:
        return owner
    paid = await session.scalar(
        select(func.count())
        .select_from(Invoice)
        .where(
            Invoice.owner_key == owner.owner_key,
            Invoice.chain_id == chain_id,
            Invoice.paid,
            Invoice.paid_at >= now_ms - DAY_MS,
        )
    )
    paid = paid or 0
    return Spender(owner.owner_key, owner.share_key, paid, paid * limits.sweep_gas_per_paid_invoice)


async def check(
    session: AsyncSession,
    limits: Limits,
    chain_id: int,
    spender: Spender | None,
    gas: int,
    now_ms: int,
) -> list[RelayerSpend]:
    """Refuse a transaction of ``gas`` for ``spender`` (None: the service's own) that the
    day's budget has no room for (``BudgetExhausted``), or whose owner is set aside
    (``SetAside``); returns the counts it is to be added to."""
    if spender is not None:
        await check_set_aside(session, chain_id, spender.owner_key, now_ms)
    day_start = now_ms - now_ms % DAY_MS
    retry_after_s = max(1, -(-(day_start + DAY_MS - now_ms) // 1000))
    shares = [(CHAIN_SHARE, limits.chain_tx_per_day, limits.chain_gas_per_day, "the chain")]
    if spender is not None:
        max_tx = limits.owner_tx_per_day + spender.extra_tx
        max_gas = limits.owner_gas_per_day + spender.extra_gas
        shares.append((spender.share_key, max_tx, max_gas, "this owner"))
    rows = []
    for share_key, max_count, max_gas, whose in shares:
        row = await session.get(
            RelayerSpend, (chain_id, day_start, share_key), populate_existing=True
        )
        if row is None:
            row = RelayerSpend(
                chain_id=chain_id, day_start_ms=day_start, share_key=share_key, transactions=0,
                gas=0, updated_at=now_ms,
            )  # fmt: skip
        if row.transactions + 1 > max_count or row.gas + gas > max_gas:
            raise BudgetExhausted(
                f"the relayer's budget for {whose} on chain {chain_id} is used up for today "
                f"(at most {max_count} transactions and {max_gas} gas a day)",
                retry_after_s,
            )
        rows.append(row)
    return rows


async def charge(
    session: AsyncSession,
    limits: Limits,
    chain_id: int,
    spender: Spender | None,
    gas: int,
    now_ms: int,
) -> None:
    """Count one transaction of ``gas`` for ``spender`` today, or refuse it (``check``).
    Runs under the chain's relayer account lock, which serialises every charge on the chain
    in every process."""
    for row in await check(session, limits, chain_id, spender, gas, now_ms):
        session.add(row)
        row.transactions += 1
        row.gas += gas
        row.updated_at = now_ms


async def check_set_aside(
    session: AsyncSession, chain_id: int, owner_key: str, now_ms: int
) -> None:
    """``SetAside`` while the owner waits after its transactions reverted on-chain."""
    held = await session.get(OwnerSetAside, (chain_id, owner_key), populate_existing=True)
    if held is not None and now_ms < held.next_retry_at:
        raise SetAside(
            f"this owner's relayed transactions on chain {chain_id} reverted "
            f"({held.reverts} in a row); nothing is relayed for it until the retry time",
            max(1, -(-(held.next_retry_at - now_ms) // 1000)),
        )


async def after_final(
    session: AsyncSession, dialect: str, limits: Limits, row: RelayerTransaction, now_ms: int
) -> None:
    """A final transaction's outcome for its owner, in the transaction that marks it final:
    reverted sets the owner aside (one more revert), confirmed ends that."""
    if row.owner_key is None or row.status == TxStatus.DROPPED:
        return
    if row.purpose == TxPurpose.GASLESS and row.status != TxStatus.CONFIRMED:
        # A payer's authorization reverts when anyone submitted the same one first (it is
        # public once broadcast), which says nothing of the owner: its share bounds the cost.
        return
    key = (row.chain_id, row.owner_key)
    if row.status == TxStatus.CONFIRMED:
        await session.execute(
            delete(OwnerSetAside).where(
                OwnerSetAside.chain_id == row.chain_id, OwnerSetAside.owner_key == row.owner_key
            )
        )
        return
    await session.execute(
        upsert(dialect, OwnerSetAside)
        .values(
            chain_id=row.chain_id,
            owner_key=row.owner_key,
            reverts=0,
            reason="",
            next_retry_at=0,
            updated_at=now_ms,
        )  # fmt: skip
        .on_conflict_do_nothing(index_elements=["chain_id", "owner_key"])
    )
    held = await session.get(OwnerSetAside, key, with_for_update=True, populate_existing=True)
    assert held is not None
    reverts = held.reverts + 1
    delay_s = retry_delay_s(reverts, limits.revert_retry_s, limits.revert_retry_max_s)
    reason = f"{row.purpose} {row.mined_hash or row.tx_hash} reverted"
    held.reverts = reverts
    held.reason = reason
    held.next_retry_at = now_ms + int(delay_s * 1000)
    held.updated_at = now_ms
    log.warning(
        "relayer chain %s: owner %s set aside for %.0f s after %s revert(s) in a row: %s",
        row.chain_id,
        row.owner_key,
        delay_s,
        reverts,
        reason,
    )


async def purge_spend(db: Database, now_ms: int) -> int:
    """Delete the spend counts of days before yesterday (housekeeping); returns how many."""
    yesterday = now_ms - now_ms % DAY_MS - DAY_MS
    async with db.transaction() as session:
        result = await session.execute(
            delete(RelayerSpend).where(RelayerSpend.day_start_ms < yesterday)
        )
    return int(getattr(result, "rowcount", 0) or 0)
