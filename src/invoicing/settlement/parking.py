"""Parked escrows: those the withdrawals leave alone for a while.

An escrow is parked when a withdraw of it alone does not simulate or its sweep was mined
reverted (``ParkKind.FAILING``), or when its confirmed sweep moved nothing, say a token that
blocks the escrow (``ParkKind.NO_EFFECT``). It is tried again once ``next_retry_at`` has
passed (the delay doubles with each failure, ``withdrawal_park_retry_s`` up to
``withdrawal_park_retry_max_s``), or sooner when its balance differs from the one it was
parked with. A sweep that moves its funds removes the row. Every other escrow, batch and
chain goes on meanwhile. Operators list them with ``invoicing parked``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import Database, upsert
from invoicing.settings import Settings
from invoicing.settlement.backoff import retry_delay_s
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import ParkedEscrow

log = logging.getLogger(__name__)


class Unread(enum.Enum):
    """The caller did not read the parked row first (``park(seen=UNREAD)``)."""

    UNREAD = enum.auto()


UNREAD = Unread.UNREAD


def is_due(balance: int | None, parked: ParkedEscrow | None, now_ms: int) -> bool:
    """Whether an escrow holding ``balance`` is to be swept now: its balance is known and not
    zero, and it is not parked, or its retry time has come, or its balance changed."""
    if balance is None or balance <= 0:
        return False
    if parked is None:
        return True
    return now_ms >= parked.next_retry_at or balance != int(parked.balance_raw)


async def parked_of(session: AsyncSession, invoice_ids: Sequence[str]) -> dict[str, ParkedEscrow]:
    rows = await session.scalars(
        select(ParkedEscrow).where(ParkedEscrow.invoice_id.in_(list(invoice_ids)))
    )
    return {row.invoice_id: row for row in rows}


async def park(
    session: AsyncSession,
    dialect: str,
    settings: Settings,
    invoice: Invoice,
    kind: str,
    reason: str,
    balance: int,
    now_ms: int,
    *,
    seen: ParkedEscrow | None | Unread = UNREAD,
) -> ParkedEscrow | None:
    """Park (or park again, one more failure) ``invoice``'s escrow, in the caller's
    transaction. Given ``seen`` (the row as the caller read it, None for none), an escrow
    that another process parked since is left as it is (None): two processes never count
    one failure twice."""
    parked = await session.scalar(
        select(ParkedEscrow)
        .where(ParkedEscrow.invoice_id == invoice.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if parked is None:
        attempts = 1
        inserted = await session.scalar(
            upsert(dialect, ParkedEscrow)
            .values(
                invoice_id=invoice.id,
                chain_id=invoice.chain_id,
                owner_address=invoice.owner_address,
                token_address=invoice.token_address,
                payment_address=invoice.payment_address,
                kind=kind,
                reason=reason,
                balance_raw=str(balance),
                attempts=attempts,
                next_retry_at=now_ms + _delay_ms(settings, attempts),
                created_at=now_ms,
                updated_at=now_ms,
            )
            .on_conflict_do_nothing(index_elements=["invoice_id"])
            .returning(ParkedEscrow.invoice_id)
        )
        if inserted is None:
            return None  # another process parked it first
        parked = await session.get(ParkedEscrow, invoice.id, populate_existing=True)
        assert parked is not None
    else:
        if not isinstance(seen, Unread) and _version(seen) != _version(parked):
            return None
        parked.attempts += 1
        parked.kind = kind
        parked.reason = reason
        parked.balance_raw = str(balance)
        parked.next_retry_at = now_ms + _delay_ms(settings, parked.attempts)
        parked.updated_at = now_ms
    log.warning(
        "withdrawals on chain %s: escrow %s (invoice %s) parked after %s failure(s): %s; "
        "next try in %.0f s or when its balance changes",
        invoice.chain_id,
        invoice.payment_address,
        invoice.id,
        parked.attempts,
        reason,
        (parked.next_retry_at - now_ms) / 1000,
    )
    return parked


def _version(parked: ParkedEscrow | None) -> tuple[int, int] | None:
    return None if parked is None else (parked.attempts, parked.updated_at)


def _delay_ms(settings: Settings, attempts: int) -> int:
    delay_s = retry_delay_s(
        attempts, settings.withdrawal_park_retry_s, settings.withdrawal_park_retry_max_s
    )
    return int(delay_s * 1000)


async def unpark(session: AsyncSession, invoice_ids: Sequence[str]) -> None:
    """Forget the parking of escrows whose funds a sweep moved."""
    if invoice_ids:
        await session.execute(
            delete(ParkedEscrow).where(ParkedEscrow.invoice_id.in_(list(invoice_ids)))
        )


async def parked_escrows(db: Database, chain_id: int | None = None) -> list[ParkedEscrow]:
    """Every parked escrow (of one chain), the next to be retried first: for operators."""
    query = select(ParkedEscrow).order_by(ParkedEscrow.next_retry_at, ParkedEscrow.invoice_id)
    if chain_id is not None:
        query = query.where(ParkedEscrow.chain_id == chain_id)
    async with db.sessions() as session:
        return list(await session.scalars(query))


def parked_to_dict(parked: ParkedEscrow) -> dict[str, object]:
    """A parked escrow as ``invoicing parked`` prints it (times in ms, amounts raw)."""
    return {
        "invoice": parked.invoice_id,
        "chainId": parked.chain_id,
        "ownerAddress": parked.owner_address,
        "tokenAddress": parked.token_address,
        "paymentAddress": parked.payment_address,
        "kind": parked.kind,
        "reason": parked.reason,
        "balanceRaw": parked.balance_raw,
        "attempts": parked.attempts,
        "nextRetryAt": parked.next_retry_at,
        "parkedAt": parked.created_at,
    }
