"""The payment seam's tables: the owners who let the relayer pay for payments into their
invoices or to them (per chain), and every payer authorization the relayer carried, so that
one authorization is carried and answered as a success once."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class AuthorizationStatus:
    SUBMITTED = "submitted"  # its relayer transaction is pending
    CONFIRMED = "confirmed"  # mined with status 1 at the chain's confirmation depth
    FAILED = "failed"  # reverted or dropped: it may be presented again


class GaslessOptIn(Base):
    """An owner's choice on one chain: the relayer may pay for payers' payments to it
    (off until the owner turns it on)."""

    __tablename__ = "gasless_opt_ins"

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)  # lower case
    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class RelayedAuthorization(Base):
    """A payer's authorization (token, payer, nonce) the relayer carried, by any method.
    Written with the send under the relayer account lock: one row per transaction, and at
    most one pending or confirmed row per authorization."""

    __tablename__ = "relayed_authorizations"
    __table_args__ = (
        Index("ix_relayed_authorizations_key", "chain_id", "token", "payer", "nonce"),
        Index("ix_relayed_authorizations_payer", "chain_id", "payer", "created_at"),
    )

    relayer_tx_id: Mapped[str] = mapped_column(
        ForeignKey("relayer_transactions.id"), primary_key=True
    )
    chain_id: Mapped[int] = mapped_column(BigInteger)
    token: Mapped[str] = mapped_column(String(42))  # checksummed
    payer: Mapped[str] = mapped_column(String(42))  # checksummed
    nonce: Mapped[str] = mapped_column(String(66))  # 0x + 64 hex digits
    method: Mapped[str] = mapped_column(String(32))  # the payment method that carried it
    owner_key: Mapped[str] = mapped_column(String(42))  # whose share paid (lower case)
    # keccak256 of the target and calldata: the same authorization has the same one.
    request_hash: Mapped[str] = mapped_column(String(66))
    tx_hash: Mapped[str] = mapped_column(String(66))  # as first sent
    status: Mapped[str] = mapped_column(String(16))  # an AuthorizationStatus value
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
