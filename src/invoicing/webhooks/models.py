"""The webhook outbox: one event per paid transition, and every delivery attempt."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class EventStatus:
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookEvent(Base):
    __tablename__ = "webhook_events"
    __table_args__ = (
        Index("ix_webhook_events_due", "status", "next_attempt_at"),
        # Housekeeping finds finished events past the retention (webhooks/retention.py).
        Index("ix_webhook_events_finished", "status", "created_at"),
    )

    # Sent as x-service-event-id; stable across retries.
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    invoice_pk: Mapped[str] = mapped_column(ForeignKey("invoices.id"), index=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    url: Mapped[str] = mapped_column(String(2048))
    # The endpoint (SHA-256 of url, see endpoints.py) and its host:port.
    endpoint_key: Mapped[str] = mapped_column(String(64))
    endpoint_host: Mapped[str] = mapped_column(String(300))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[int] = mapped_column(BigInteger)
    # A worker that claimed the event owns it until this time (crash → another takes over).
    claimed_until: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger)
    delivered_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class WebhookAttempt(Base):
    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(BigInteger)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class WebhookEndpoint(Base):
    """An endpoint whose latest attempts failed (a success deletes the row)."""

    __tablename__ = "webhook_endpoints"

    # SHA-256 of the webhook URL, hex.
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    consecutive_failures: Mapped[int] = mapped_column(Integer)
    last_failure_at: Mapped[int] = mapped_column(BigInteger)
