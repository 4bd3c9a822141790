"""Payments of record and the escrows still to be scanned for them (``invoices.payments``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.invoices import RAW


class PaymentRecord(Base):
    """One transfer into an escrow. ``source`` tells transfers of one transaction apart:
    ``tx`` (the transaction's own value), ``log:<index>`` (an ERC-20 ``Transfer`` log) or
    ``trace:<trace address>`` (coin sent by a contract during the transaction)."""

    __tablename__ = "payment_records"
    __table_args__ = (
        Index("ix_payment_records_from", "from_address"),
        Index("ix_payment_records_tx", "tx_hash"),
        Index("ix_payment_records_unfinal", "chain_id", "final", "block_number"),
        # The payments report: a month's records in its order (``reports.sources``).
        Index("ix_payment_records_block_time", "block_time", "invoice_id", "tx_hash", "source"),
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
    # The block's timestamp (unix ms); on records made before it was kept, when they were
    # recorded. The payments report's window and order.
    block_time: Mapped[int] = mapped_column(BigInteger)
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
