"""Events and the endpoints that receive them.

An event's deliveries are rows of the webhook outbox (``webhooks.models.WebhookEvent``, one
row per target) with ``event_id`` set: one per matching enabled endpoint (``endpoint_id``),
and the spec's paid webhook of an ``invoice.paid`` event (``endpoint_id`` null), so one
worker, one claim and one per-host cap serve both.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base

# SQLite numbers rows itself only for an INTEGER PRIMARY KEY (64-bit there anyway).
SEQUENCE = BigInteger().with_variant(Integer(), "sqlite")
PING = "ping"


class Event(Base):
    """One event: the envelope ``{"id","type","createdAt","data"}`` as sent, kept for the
    events list and redelivery (``event_retention_s``)."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_owner_seq", "owner_key", "seq"),
        Index("ix_events_owner_type_seq", "owner_key", "type", "seq"),
        Index("ix_events_created_at", "created_at"),
    )

    # Insertion order: the events list pages on it, newest first.
    seq: Mapped[int] = mapped_column(SEQUENCE, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    type: Mapped[str] = mapped_column(String(40))
    # The invoice it is about (null for a ping).
    invoice_pk: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)

    def envelope(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "createdAt": self.created_at, "data": self.data}


class EventEndpoint(Base):
    """An owner's endpoint: every event of a type in ``events`` (or ``["*"]``) goes to it
    while it is enabled. One that failed every attempt for ``event_retry_window_s`` is
    disabled by the worker, with the reason and time."""

    __tablename__ = "event_endpoints"
    __table_args__ = (Index("ix_event_endpoints_owner_key", "owner_key", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(JSON)
    description: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean)
    disabled_reason: Mapped[str | None] = mapped_column(String(200), nullable=True)
    disabled_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The first failed attempt since the last success (null: not failing).
    failing_since: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)

    def receives(self, event_type: str) -> bool:
        return "*" in self.events or event_type in self.events
