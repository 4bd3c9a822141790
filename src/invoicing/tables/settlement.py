"""Relayer accounts and transactions, the withdrawals they carry, and parked escrows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.invoices import RAW


class TxStatus:
    PENDING = "pending"  # recorded (and usually broadcast), not final yet
    CONFIRMED = "confirmed"  # mined with status 1 at the chain's confirmation depth
    FAILED = "failed"  # mined with status 0 at the confirmation depth
    DROPPED = "dropped"  # its nonce was used by another transaction; nothing of ours mined


class TxPurpose:
    WITHDRAW = "withdraw"
    SET_FEE = "set_fee"
    SET_PAYOUT = "set_payout"
    SET_REFUND_DELEGATE = "set_refund_delegate"
    REFUND = "refund"
    # A payer's EIP-3009 transferWithAuthorization into an invoice's escrow (gasless).
    GASLESS = "gasless"
    # A subscription's charge of one period into that period's escrow (payments/subscriptions).
    SUBSCRIPTION_CHARGE = "subscription_charge"
    # A payer's EIP-2612 permit giving the Subscriptions contract its allowance.
    SUBSCRIPTION_PERMIT = "subscription_permit"
    # A payer's or owner's signed cancellation of a subscription (cancelWithSignature).
    SUBSCRIPTION_CANCEL = "subscription_cancel"


class RelayerAccount(Base):
    """One sender per chain; the row is locked while a nonce is allocated (all processes)."""

    __tablename__ = "relayer_accounts"

    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    address: Mapped[str] = mapped_column(String(42))
    next_nonce: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class RelayerTransaction(Base):
    """Every transaction the relayer signs, with each replacement's hash."""

    __tablename__ = "relayer_transactions"
    __table_args__ = (
        UniqueConstraint("chain_id", "sender", "nonce"),
        Index("ix_relayer_transactions_status", "chain_id", "status", "nonce"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    sender: Mapped[str] = mapped_column(String(42))
    nonce: Mapped[int] = mapped_column(BigInteger)
    purpose: Mapped[str] = mapped_column(String(32))
    to_address: Mapped[str] = mapped_column(String(42))
    data: Mapped[str] = mapped_column(Text)  # 0x hex calldata
    value: Mapped[str] = mapped_column(RAW, default="0")
    gas: Mapped[int] = mapped_column(BigInteger)
    max_fee_per_gas: Mapped[str] = mapped_column(RAW)
    max_priority_fee_per_gas: Mapped[str] = mapped_column(RAW)
    # The newest signed version; ``hashes`` lists every version (any of them may be mined).
    tx_hash: Mapped[str] = mapped_column(String(66), unique=True)
    raw_tx: Mapped[str] = mapped_column(Text)
    hashes: Mapped[list[Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    sent_at: Mapped[int] = mapped_column(BigInteger)
    mined_hash: Mapped[str | None] = mapped_column(String(66), nullable=True)
    block_number: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gas_used: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Set while the next fee bump would pass the chain's max fee per gas (it waits there).
    fee_ceiling_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The owner it was sent for (lowercased); set aside when its transactions revert.
    owner_key: Mapped[str | None] = mapped_column(String(42), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class RelayerSpend(Base):
    """What the relayer recorded in one UTC day on one chain for one share of its budget
    (``settlement.budget``): an owner's, the newcomers', or the chain's whole (``*``)."""

    __tablename__ = "relayer_spend"

    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    day_start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    share_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    transactions: Mapped[int] = mapped_column(Integer)
    # Gas limits of the transactions recorded: the most they can burn.
    gas: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class OwnerSetAside(Base):
    """An owner whose relayed transactions reverted on-chain: nothing is relayed for it on
    the chain before ``next_retry_at`` (the delay doubles with each revert in a row)."""

    __tablename__ = "relayer_owners_set_aside"

    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    reverts: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    next_retry_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class MetaTransaction(Base):
    """An owner-signed call the relayer paid to send (``settlement.meta``).

    While its transaction is pending the row holds (chain, owner, nonce): the partial unique
    index lets no second transaction for that nonce be recorded, by any process. Rows stay
    after that (``holds_nonce`` false) and count against the owner's daily budget."""

    __tablename__ = "meta_transactions"
    __table_args__ = (
        Index(
            "ux_meta_transactions_pending",
            "chain_id",
            "owner_key",
            "nonce",
            unique=True,
            postgresql_where=text("holds_nonce"),
            sqlite_where=text("holds_nonce"),
        ),
        Index("ix_meta_transactions_budget", "chain_id", "owner_key", "created_at"),
    )

    relayer_tx_id: Mapped[str] = mapped_column(
        ForeignKey("relayer_transactions.id"), primary_key=True
    )
    chain_id: Mapped[int] = mapped_column(BigInteger)
    owner_key: Mapped[str] = mapped_column(String(42))  # lower case
    nonce: Mapped[str] = mapped_column(RAW)
    # keccak256 of target and calldata: an identical submission has the same one.
    request_hash: Mapped[str] = mapped_column(String(66))
    holds_nonce: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[int] = mapped_column(BigInteger)


class WithdrawalStatus:
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class Withdrawal(Base):
    """One withdraw(owner, token, salts) call; its items are the escrows it sweeps."""

    __tablename__ = "withdrawals"
    __table_args__ = (Index("ix_withdrawals_status", "chain_id", "status"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    owner_address: Mapped[str] = mapped_column(String(42))
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    relayer_tx_id: Mapped[str] = mapped_column(ForeignKey("relayer_transactions.id"), unique=True)
    status: Mapped[str] = mapped_column(String(16))
    # Sum of the escrow balances read when the batch was planned.
    planned_raw: Mapped[str] = mapped_column(RAW)
    # From the confirmed Withdrawn event: what was swept and the fee share of it.
    swept_raw: Mapped[str | None] = mapped_column(RAW, nullable=True)
    fee_raw: Mapped[str | None] = mapped_column(RAW, nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    confirmed_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class WithdrawalItem(Base):
    """An invoice's escrow in a withdrawal. A pending withdrawal claims its invoices."""

    __tablename__ = "withdrawal_items"
    __table_args__ = (Index("ix_withdrawal_items_invoice", "invoice_id"),)

    withdrawal_id: Mapped[str] = mapped_column(ForeignKey("withdrawals.id"), primary_key=True)
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    # The escrow's balance read when the batch was planned.
    amount_raw: Mapped[str] = mapped_column(RAW)
    # What the confirmed sweep moved out of this escrow ("0": nothing, e.g. a token that
    # blocks it); None while pending, or when the balance after the sweep was unreadable.
    moved_raw: Mapped[str | None] = mapped_column(RAW, nullable=True)


class ParkKind:
    # A withdraw of this escrow alone does not simulate, or its mined sweep reverted.
    FAILING = "failing"
    # Nothing to move: its confirmed sweep moved nothing, or a paid invoice's escrow is
    # empty (swept outside this service) or its balance unreadable.
    NO_EFFECT = "no_effect"


class ParkedEscrow(Base):
    """An escrow the withdrawals leave alone until ``next_retry_at`` (exponential backoff),
    or sooner once its balance differs from ``balance_raw``. ``reason`` is for operators
    (``invoicing parked``). The row goes when a sweep of the escrow moves funds."""

    __tablename__ = "parked_escrows"
    __table_args__ = (Index("ix_parked_escrows_retry", "chain_id", "next_retry_at"),)

    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    owner_address: Mapped[str] = mapped_column(String(42))
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    payment_address: Mapped[str] = mapped_column(String(42))
    kind: Mapped[str] = mapped_column(String(16))  # a ParkKind value
    reason: Mapped[str] = mapped_column(Text)
    # The escrow's balance when it was parked.
    balance_raw: Mapped[str] = mapped_column(RAW)
    attempts: Mapped[int] = mapped_column(Integer)
    next_retry_at: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class EscrowAsset(Base):
    """A balance found in an escrow by the low-rate lifetime pass or at a sweep of it
    (``settlement.assets``): the invoice's own token once the invoice is settled (``own``:
    swept by the invoice's withdrawals, never shown), or any other allow-listed token or the
    native coin (shown to the owner as ``otherBalances`` and swept in batches of that asset).
    Only non-zero balances have a row; an unreadable one leaves the row as it was."""

    __tablename__ = "escrow_assets"
    __table_args__ = (Index("ix_escrow_assets_chain", "chain_id", "own"),)

    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    # Lower case; the zero address for the native coin.
    token_address: Mapped[str] = mapped_column(String(42), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    own: Mapped[bool] = mapped_column(Boolean)
    balance_raw: Mapped[str] = mapped_column(RAW)
    seen_at: Mapped[int] = mapped_column(BigInteger)
    # The last sweep of this asset that did not empty the escrow (a blocking token, a failed
    # simulation): not tried again until a later read sees it (``seen_at`` after this).
    attempted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
