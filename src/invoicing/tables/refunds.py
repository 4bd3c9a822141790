"""Refunds of an invoice: from its escrow (``Refund``, one row per relayed ``refundMeta``), or,
once the escrow was swept, from the owner's wallet (``WalletRefund``, a transfer the owner
signed and paid for, checked on chain). The owner's view lists both as its ``refunds``
(``invoices.owner_view``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, String, false, select
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.invoices import RAW


class RefundStatus:
    SUBMITTED = "submitted"  # its relayer transaction is pending
    CONFIRMED = "confirmed"  # mined with status 1 at the chain's confirmation depth
    FAILED = "failed"  # reverted, or dropped (its relayer nonce went to another transaction)


class Refund(Base):
    """A refund from an invoice's escrow. While ``submitted`` it holds the escrow: the
    withdrawals leave it alone (``pending_refund_ids``)."""

    __tablename__ = "refunds"
    __table_args__ = (
        Index("ix_refunds_invoice", "invoice_id", "created_at"),
        Index("ix_refunds_status", "status"),
    )

    relayer_tx_id: Mapped[str] = mapped_column(
        ForeignKey("relayer_transactions.id"), primary_key=True
    )
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"))
    tx_hash: Mapped[str] = mapped_column(String(66))  # as first sent (the 202 answer's)
    to_address: Mapped[str] = mapped_column(String(42))
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    amount_raw: Mapped[str] = mapped_column(RAW)
    status: Mapped[str] = mapped_column(String(16))  # a RefundStatus value
    # A void: the whole payment of an uncaptured manual-capture invoice back to the payer; once
    # confirmed the invoice is voided (``invoices.capture``).
    voids: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


def pending_void_ids() -> Any:
    """Invoice ids whose void is in flight: neither captured nor voided again meanwhile."""
    return select(Refund.invoice_id).where(
        Refund.status == RefundStatus.SUBMITTED, Refund.voids.is_(True)
    )


def pending_refund_ids() -> Any:
    """Invoice ids whose escrow has a refund in flight: no sweep may take it meanwhile."""
    return select(Refund.invoice_id).where(Refund.status == RefundStatus.SUBMITTED)


class WalletRefund(Base):
    """A refund of a swept invoice paid from the owner's wallet: a plain transfer (native
    coin, or an ERC-20 ``transfer``) the owner sent, recorded once the chain shows it mined,
    from the owner, to ``to_address``, of ``amount_raw`` (``refunds.wallet``)."""

    __tablename__ = "wallet_refunds"
    __table_args__ = (Index("ix_wallet_refunds_invoice", "invoice_id", "created_at"),)

    tx_hash: Mapped[str] = mapped_column(String(66), primary_key=True)  # lowercase hex
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"))
    from_address: Mapped[str] = mapped_column(String(42))
    to_address: Mapped[str] = mapped_column(String(42))
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    amount_raw: Mapped[str] = mapped_column(RAW)
    block_number: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)


class RefundClaim(Base):
    """A refund claim link of an invoice (``refunds.claims``): one per invoice at a time. The
    payer who holds the link's token (stored only as its SHA-256) names the address the refund
    should go to; the owner's signed refund to that address approves it, and fixes it."""

    __tablename__ = "refund_claims"
    __table_args__ = (Index("ix_refund_claims_token", "token_hash", unique=True),)

    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64))  # hex SHA-256 of the link's token
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    address: Mapped[str | None] = mapped_column(String(42), nullable=True)  # checksummed
    claimed_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    approved_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
