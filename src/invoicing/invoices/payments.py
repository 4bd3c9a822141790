"""Payments of record: every transfer that reached an invoice's escrow, as the chain shows it.

The balance decides whether an invoice is paid (``invoices.lifecycle``); these rows are what
people read: who paid, in which transaction, how much. The monitor queues a scan of an
escrow whose balance it saw change (``PaymentScan``: the blocks the change lies in) in the
transaction that stores the reading, and a step of its own (``monitor.records``) reads the
transfers later, so recording never delays marking paid. A record keeps its block's hash:
while the block is not yet ``final`` the step checks the hash again, and a reorg that
removed the block removes the record (the escrow is scanned again).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, String, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base, upsert
from invoicing.invoices.models import RAW


class PaymentRecord(Base):
    """One transfer into an escrow. ``source`` tells transfers of one transaction apart:
    ``tx`` (the transaction's own value), ``log:<index>`` (an ERC-20 ``Transfer`` log) or
    ``trace:<trace address>`` (coin sent by a contract during the transaction)."""

    __tablename__ = "payment_records"
    __table_args__ = (
        Index("ix_payment_records_from", "from_address"),
        Index("ix_payment_records_tx", "tx_hash"),
        Index("ix_payment_records_unfinal", "chain_id", "final", "block_number"),
    )

    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    tx_hash: Mapped[str] = mapped_column(String(66), primary_key=True)  # lowercase hex
    source: Mapped[str] = mapped_column(String(80), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    from_address: Mapped[str] = mapped_column(String(42))  # checksummed
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    amount_raw: Mapped[str] = mapped_column(RAW)
    block_number: Mapped[int] = mapped_column(BigInteger)
    block_hash: Mapped[str] = mapped_column(String(66))
    # The block's timestamp (unix ms); None on records made before it was kept (the report
    # then takes ``created_at``).
    block_time: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The block is deep enough that the step no longer checks its hash.
    final: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[int] = mapped_column(BigInteger)


class PaymentScan(Base):
    """Blocks of an escrow still to be searched for transfers (one row per invoice, its
    range widened when another change comes before the scan)."""

    __tablename__ = "payment_scans"
    __table_args__ = (Index("ix_payment_scans_chain", "chain_id"),)

    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    from_block: Mapped[int] = mapped_column(BigInteger)
    to_block: Mapped[int] = mapped_column(BigInteger)


async def payments_in(
    session: AsyncSession, invoice_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """The ``payments`` of each invoice that has some, in chain order, by invoice id."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rows = await session.scalars(
        select(PaymentRecord)
        .where(PaymentRecord.invoice_id.in_(list(invoice_ids)))
        .order_by(PaymentRecord.block_number, PaymentRecord.tx_hash, PaymentRecord.source)
    )
    for record in rows:
        found[record.invoice_id].append(payment_view(record))
    return found


def payment_view(record: PaymentRecord) -> dict[str, Any]:
    """One payment of record as the owner's view lists it."""
    return {
        "txHash": record.tx_hash,
        "from": record.from_address,
        "amountRaw": record.amount_raw,
        "tokenAddress": record.token_address,
        "blockNumber": record.block_number,
    }


# Blocks searched back from a change whose start is unknown (an escrow never read with funds
# by a block pass that ran the block before: the first pass after a start, a due pass, a
# live re-check).
UNKNOWN_START_BLOCKS = 64


def scan_of(
    invoice_id: str, chain_id: int, last_block: int, block: int, first_unread: int | None
) -> dict[str, Any]:
    """The scan of a balance change seen at ``block``: from the block after the previous
    stored reading (``last_block``; 0 = none), else from ``first_unread`` (the first block
    the pass that saw it had not read), else ``UNKNOWN_START_BLOCKS`` back."""
    if last_block:
        start = last_block + 1
    elif first_unread is not None:
        start = first_unread
    else:
        start = block - UNKNOWN_START_BLOCKS
    start = max(0, min(start, block))
    return {"invoice_id": invoice_id, "chain_id": chain_id, "from_block": start, "to_block": block}


async def queue_scans(session: AsyncSession, dialect: str, scans: Sequence[dict[str, Any]]) -> None:
    """Queue ``scans`` (``scan_of``) in the caller's transaction; a scan already queued for an
    invoice is widened to cover both."""
    if not scans:
        return
    insert = upsert(dialect, PaymentScan)
    await session.execute(
        insert.on_conflict_do_update(
            index_elements=[PaymentScan.invoice_id],
            set_={
                "from_block": func.min(PaymentScan.from_block, insert.excluded.from_block)
                if dialect == "sqlite"
                else func.least(PaymentScan.from_block, insert.excluded.from_block),
                "to_block": func.max(PaymentScan.to_block, insert.excluded.to_block)
                if dialect == "sqlite"
                else func.greatest(PaymentScan.to_block, insert.excluded.to_block),
            },
        ),
        list(scans),
    )
