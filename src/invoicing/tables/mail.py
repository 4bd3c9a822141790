"""The mail tables: what an owner has mailed (``owner_mail_settings``), payers' receipt
requests (``mail_receipts``) and the mail outbox (``mail_outbox``, one row per message)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class MailStatus:
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class OwnerMail(Base):
    """An owner's mail settings: the address events are mailed to and which events."""

    __tablename__ = "owner_mail_settings"

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    email: Mapped[str] = mapped_column(String(254))
    # Event types (``invoice.paid``, …); empty: nothing is mailed.
    events: Mapped[list[str]] = mapped_column(JSON)
    # The language of the mail (a payment page language code: ``en``, ``de``, ``zh-Hans``…).
    language: Mapped[str] = mapped_column(String(16), server_default="en")
    # Whether payers may ask for a receipt on the payment page (``receipts``).
    receipts: Mapped[bool] = mapped_column(Boolean, server_default=false())
    updated_at: Mapped[int] = mapped_column(BigInteger)


class ReceiptRequest(Base):
    """A payer's address for the receipt of one invoice, given on its payment page; the
    receipt is mailed when the invoice is paid (``queue``), if the owner still sends them."""

    __tablename__ = "mail_receipts"

    invoice_pk: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    email: Mapped[str] = mapped_column(String(254))
    language: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[int] = mapped_column(BigInteger)


class MailMessage(Base):
    """One message to send: the event it tells of, rendered when it is sent."""

    __tablename__ = "mail_outbox"
    __table_args__ = (
        Index("ix_mail_outbox_due", "status", "next_attempt_at"),
        Index("ix_mail_outbox_finished", "status", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42), index=True)
    # The event (``events.id``) it tells of, and its type.
    event_id: Mapped[str] = mapped_column(String(36))
    event_type: Mapped[str] = mapped_column(String(40))
    recipient: Mapped[str] = mapped_column(String(254))
    language: Mapped[str] = mapped_column(String(16))
    # What the texts need of the event: the owner's view of the invoice.
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[int] = mapped_column(BigInteger)
    # A worker that claimed the message owns it until this time (crash: another takes over).
    claimed_until: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger)
    sent_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
