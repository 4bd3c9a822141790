"""Assets found in escrows outside the invoice's own flow, kept in ``escrow_assets``.

Funds reaching any escrow (partial, late, cancelled, overpaid, after a sweep) are swept to
the owner (docs/architecture.md#stranded-funds). Two readers find them and write here:

- the monitor's low-rate lifetime pass (``monitor.lifetime``), which reads every escrow for
  life, once per ``lifetime_check_interval_s`` after its late-payment window: its own token,
  every allow-listed token of the chain and the native coin;
- every confirmed sweep, which reads the escrow's other assets at the sweep's block.

A row is either the invoice's own token (``own``: only once the invoice is settled, so the
invoice's withdrawals pick the escrow up again, ``candidates.settled_candidates``) or another
asset (shown to the owner as ``otherBalances``, swept by ``settlement.stranded``). Only
non-zero balances have a row; an unreadable balance (a hostile token) is unknown: it writes
nothing, is never swept because of that reading and never shown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.config import ChainConfig
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database, upsert
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import EscrowAsset, Withdrawal, WithdrawalItem

# Rows touched per statement (bound parameters stay far under both databases' limits).
_CHUNK = 1000
# The invoice's own token is recorded only once nothing else sweeps it: a pending or paid
# invoice's balance is the invoice's own business (the monitor, the paid withdrawals).
_OWN_RECORDED = frozenset({InvoiceStatus.COMPLETED, InvoiceStatus.CANCELLED, InvoiceStatus.EXPIRED})


def asset_key(token: str | None) -> str:
    """How ``escrow_assets`` names an asset: the token in lower case, the zero address for
    the native coin."""
    return (token or ZERO_ADDRESS).lower()


def asset_token(key: str) -> str | None:
    """The token of an asset key (None for the native coin)."""
    return None if key == ZERO_ADDRESS else key


def chain_assets(config: ChainConfig) -> list[str]:
    """The asset keys every escrow of the chain is read for: native, then the allow-list."""
    return [ZERO_ADDRESS, *(token.address.lower() for token in config.tokens)]


@dataclass(frozen=True)
class Escrow:
    """What a reading needs of an invoice."""

    id: str
    payment_address: str
    token_address: str | None
    status: str


@dataclass(frozen=True)
class Reading:
    """One asset's balance in one escrow (None: unreadable)."""

    escrow: Escrow
    asset: str  # an asset key
    balance: int | None

    @property
    def own(self) -> bool:
        return self.asset == asset_key(self.escrow.token_address)


async def read_assets(
    chain: ChainGateway,
    escrows: Sequence[Escrow],
    block: int | str,
    batch_size: int,
    *,
    skip: str | None = None,
) -> list[Reading]:
    """Every asset of every escrow (the chain's assets and each escrow's own token, except
    ``skip``), one ``balancesOf`` per asset and chunk of ``batch_size`` escrows."""
    by_asset: dict[str, list[Escrow]] = {key: [] for key in chain_assets(chain.config)}
    for escrow in escrows:
        for key in {*chain_assets(chain.config), asset_key(escrow.token_address)}:
            by_asset.setdefault(key, []).append(escrow)
    readings: list[Reading] = []
    for key, group in by_asset.items():
        if key == skip:
            continue
        for start in range(0, len(group), batch_size):
            chunk = group[start : start + batch_size]
            addresses = [escrow.payment_address for escrow in chunk]
            values = await chain.balances(asset_token(key), addresses, block)
            readings.extend(Reading(e, key, v) for e, v in zip(chunk, values, strict=True))
    return readings


def _recorded(reading: Reading) -> bool:
    """Readings worth a row: known, and for the own token only once the invoice is settled."""
    if reading.balance is None:
        return False
    return not reading.own or reading.escrow.status in _OWN_RECORDED


async def record_readings(
    session: AsyncSession, dialect: str, chain_id: int, readings: Iterable[Reading], now_ms: int
) -> int:
    """Store readings in the caller's transaction: a non-zero balance upserts its row, a zero
    one deletes it, an unreadable one changes nothing. Returns the non-zero ones stored."""
    # In key order, as every writer of these rows goes: concurrent writers do not deadlock.
    kept = sorted((r for r in readings if _recorded(r)), key=lambda r: (r.escrow.id, r.asset))
    found = [r for r in kept if r.balance]
    # Most escrows hold nothing: only rows that exist are deleted.
    existing = await _existing(session, list({r.escrow.id for r in kept if not r.balance}))
    emptied: dict[str, list[str]] = defaultdict(list)
    for reading in kept:
        if not reading.balance and (reading.escrow.id, reading.asset) in existing:
            emptied[reading.asset].append(reading.escrow.id)
    for key, ids in emptied.items():
        for start in range(0, len(ids), _CHUNK):
            await session.execute(
                delete(EscrowAsset).where(
                    EscrowAsset.token_address == key,
                    EscrowAsset.invoice_id.in_(ids[start : start + _CHUNK]),
                )
            )
    for start in range(0, len(found), _CHUNK):
        await _upsert(session, dialect, chain_id, found[start : start + _CHUNK], now_ms)
    return len(found)


async def _existing(session: AsyncSession, ids: list[str]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for start in range(0, len(ids), _CHUNK):
        rows = await session.execute(
            select(EscrowAsset.invoice_id, EscrowAsset.token_address).where(
                EscrowAsset.invoice_id.in_(ids[start : start + _CHUNK])
            )
        )
        pairs.update((invoice_id, key) for invoice_id, key in rows)
    return pairs


async def _upsert(
    session: AsyncSession, dialect: str, chain_id: int, found: Sequence[Reading], now_ms: int
) -> None:
    insert = upsert(dialect, EscrowAsset)
    statement = insert.on_conflict_do_update(
        index_elements=["invoice_id", "token_address"],
        set_={
            "balance_raw": insert.excluded.balance_raw,
            "seen_at": insert.excluded.seen_at,
            "own": insert.excluded.own,
        },
    )
    values: list[dict[str, Any]] = [
        {
            "invoice_id": r.escrow.id,
            "token_address": r.asset,
            "chain_id": chain_id,
            "own": r.own,
            "balance_raw": str(r.balance),
            "seen_at": now_ms,
            "attempted_at": None,
        }
        for r in found
    ]
    await session.execute(statement, values)
    shown = sorted({r.escrow.id for r in found if not r.own})
    for start in range(0, len(shown), _CHUNK):
        await session.execute(
            update(Invoice)
            .where(Invoice.id.in_(shown[start : start + _CHUNK]))
            .values(has_extras=True)
        )


async def after_sweep(
    session: AsyncSession,
    token: str | None,
    after: Mapping[str, int | None],
    now_ms: int,
) -> None:
    """A confirmed sweep of ``token``: each escrow's row for it holds what is left (``after``,
    read at the sweep's block; gone when nothing is), marked attempted so that a token that
    blocks the escrow waits for the next read. An ERC-20 sweep also moved all native coin."""
    key = asset_key(token)
    ids = list(after)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        if key != ZERO_ADDRESS:
            await session.execute(
                delete(EscrowAsset).where(
                    EscrowAsset.invoice_id.in_(chunk), EscrowAsset.token_address == ZERO_ADDRESS
                )
            )
        emptied = [i for i in chunk if after[i] == 0]
        await session.execute(
            delete(EscrowAsset).where(
                EscrowAsset.invoice_id.in_(emptied), EscrowAsset.token_address == key
            )
        )
    for invoice_id, left in after.items():
        if left:
            await session.execute(
                update(EscrowAsset)
                .where(EscrowAsset.invoice_id == invoice_id, EscrowAsset.token_address == key)
                .values(balance_raw=str(left), attempted_at=now_ms)
            )


async def mark_attempted(session: AsyncSession, invoice_id: str, key: str, now_ms: int) -> None:
    """A sweep of this asset of the escrow fails: wait for the next read before trying again."""
    await session.execute(
        update(EscrowAsset)
        .where(EscrowAsset.invoice_id == invoice_id, EscrowAsset.token_address == key)
        .values(attempted_at=now_ms)
    )


def waiting_to_sweep() -> Any:
    """Rows of other assets to sweep: never tried, or seen again since the last try."""
    return and_(
        EscrowAsset.own.is_(False),
        (EscrowAsset.attempted_at.is_(None)) | (EscrowAsset.seen_at > EscrowAsset.attempted_at),
    )


def own_funds_ids() -> Any:
    """Invoice ids whose escrow holds their own token again after they were settled."""
    return select(EscrowAsset.invoice_id).where(EscrowAsset.own.is_(True))


async def assets_after_sweep(
    db: Database, chain: ChainGateway, tx_id: str, block: int, batch_size: int
) -> list[Reading]:
    """The other assets of a withdrawal's escrows at the block that mined it: every sweep of
    an escrow also looks for what else it holds (empty when the transaction is no
    withdrawal)."""
    async with db.sessions() as session:
        withdrawal = await session.scalar(
            select(Withdrawal).where(Withdrawal.relayer_tx_id == tx_id)
        )
        if withdrawal is None:
            return []
        rows = await session.execute(
            select(Invoice.id, Invoice.payment_address, Invoice.token_address, Invoice.status)
            .join(WithdrawalItem, WithdrawalItem.invoice_id == Invoice.id)
            .where(WithdrawalItem.withdrawal_id == withdrawal.id)
            .order_by(Invoice.id)
        )
        escrows = [Escrow(*row) for row in rows]
    skip = asset_key(withdrawal.token_address)
    return await read_assets(chain, escrows, block, batch_size, skip=skip)
