"""A subscription an owner offers and a payer authorizes, and each period's charge (one
invoice per period, whose escrow the contract pays into)."""

from __future__ import annotations

import enum

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.invoices import RAW


class SubscriptionStatus(enum.StrEnum):
    """docs/integration/subscriptions.md#statuses."""

    AWAITING_AUTHORIZATION = "awaiting_authorization"  # created, no payer's signature yet
    ACTIVE = "active"  # authorized; its latest period was charged, or is not due yet
    PAST_DUE = "past_due"  # a period's charge kept failing through the grace window
    CANCELLED = "cancelled"  # by the payer (on chain), the owner, or too many failed periods
    FINISHED = "finished"  # every one of its maxPeriods was charged or failed


class SubscriptionEvent(enum.StrEnum):
    """The subscription event types, stored and sent as these exact strings."""

    ACTIVATED = "subscription.activated"
    CHARGED = "subscription.charged"
    PAST_DUE = "subscription.past_due"
    CANCELLED = "subscription.cancelled"
    FINISHED = "subscription.finished"


class ChargeStatus:
    SUBMITTED = "submitted"  # its relayer transaction is pending
    CONFIRMED = "confirmed"  # the contract's bitmap has the period charged
    REVERTED = "reverted"  # its transaction failed on chain: tried again in the grace window
    FAILED = "failed"  # the grace window passed without a charge


class Subscription(Base):
    """What the owner offered (the fields the payer signs) and where it stands."""

    __tablename__ = "subscriptions"
    __table_args__ = (
        UniqueConstraint("owner_key", "subscription_ref", name="uq_subscriptions_owner_ref"),
        Index("ix_subscriptions_owner", "owner_key", "created_at"),
        Index("ix_subscriptions_due", "status", "chain_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_address: Mapped[str] = mapped_column(String(42))  # checksummed
    owner_key: Mapped[str] = mapped_column(String(42))  # lower case
    # The owner's own reference (subscriptionId), unique per owner; None when not given.
    subscription_ref: Mapped[str | None] = mapped_column(String(128), nullable=True)
    chain_id: Mapped[int] = mapped_column(BigInteger)
    token_address: Mapped[str] = mapped_column(String(42))  # checksummed
    decimals: Mapped[int] = mapped_column(Integer)
    amount: Mapped[str] = mapped_column(String(100))  # in token units, as given
    amount_raw: Mapped[str] = mapped_column(RAW)
    period_seconds: Mapped[int] = mapped_column(BigInteger)
    start_s: Mapped[int] = mapped_column(BigInteger)  # chain time of period 0
    max_periods: Mapped[int] = mapped_column(BigInteger)  # 0: no end
    salt: Mapped[str] = mapped_column(String(66))  # 0x + 64 hex digits
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    redirect_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Each period's invoice takes it: its paid webhook goes there (None: none is sent).
    webhook_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The credential that created it, as an invoice keeps its own: each period's invoice
    # carries it, so its paid webhook repeats it (the API key, or the signature and timestamp).
    auth_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    api_key_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    auth_signature: Mapped[str | None] = mapped_column(String(200), nullable=True)
    auth_timestamp: Mapped[str | None] = mapped_column(String(20), nullable=True)
    status: Mapped[str] = mapped_column(String(32))  # a SubscriptionStatus value
    # Set by the authorization: the payer, its signature, and the contract's id of it.
    payer: Mapped[str | None] = mapped_column(String(42), nullable=True)
    signature: Mapped[str | None] = mapped_column(Text, nullable=True)
    onchain_id: Mapped[str | None] = mapped_column(String(66), nullable=True)
    next_period: Mapped[int] = mapped_column(BigInteger, default=0)  # the next to charge
    failed_periods: Mapped[int] = mapped_column(Integer, default=0)  # in a row
    retry_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # ms, server clock
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    cancelled_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class SubscriptionCharge(Base):
    """One period of a subscription: its invoice, and the transaction that charged it."""

    __tablename__ = "subscription_charges"
    __table_args__ = (Index("ix_subscription_charges_invoice", "invoice_pk"),)

    subscription_pk: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"), primary_key=True)
    period: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    invoice_pk: Mapped[str] = mapped_column(ForeignKey("invoices.id"))
    payment_address: Mapped[str] = mapped_column(String(42))
    status: Mapped[str | None] = mapped_column(String(16), nullable=True)  # ChargeStatus
    tx_hash: Mapped[str | None] = mapped_column(String(66), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
