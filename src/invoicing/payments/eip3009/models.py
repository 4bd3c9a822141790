"""Gasless payments of invoices: the authorizations the relayer submitted into escrows, with
the invoice each one pays."""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.invoices import RAW
from invoicing.tables.relay import AuthorizationStatus

GaslessStatus = AuthorizationStatus


class GaslessPayment(Base):
    """A payer's transfer authorization the relayer submitted into an invoice's escrow."""

    __tablename__ = "gasless_payments"
    __table_args__ = (
        Index("ix_gasless_payments_invoice", "invoice_id", "created_at"),
        Index("ix_gasless_payments_authorization", "chain_id", "payer", "nonce"),
    )

    relayer_tx_id: Mapped[str] = mapped_column(
        ForeignKey("relayer_transactions.id"), primary_key=True
    )
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"))
    chain_id: Mapped[int] = mapped_column(BigInteger)
    payer: Mapped[str] = mapped_column(String(42))  # checksummed
    nonce: Mapped[str] = mapped_column(String(66))  # 0x + 64 hex digits
    value_raw: Mapped[str] = mapped_column(RAW)
    valid_before: Mapped[int] = mapped_column(BigInteger)
    # keccak256 of the token and calldata: the same authorization has the same one.
    request_hash: Mapped[str] = mapped_column(String(66))
    tx_hash: Mapped[str] = mapped_column(String(66))  # as first sent (the answer's)
    status: Mapped[str] = mapped_column(String(16))  # a GaslessStatus value
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
