"""The notification tables: events, the outbox of deliveries and their attempts, endpoints,
signing secrets and owner settings.

An event (:class:`Event`) is written once; each of its deliveries is a row of the outbox
(:class:`WebhookEvent`, one row per target): one per matching enabled endpoint of the owner
(``endpoint_id`` set; retried with backoff until ``retry_until``) and the paid webhook
to an invoice's ``webhookUrl`` (``endpoint_id`` null; ``webhook_max_attempts`` attempts
``webhook_retry_delay_s`` apart). ``event_id`` links both kinds to their event (the paid
webhook to its ``invoice.paid`` event), so one worker, one claim and one per-host cap serve
both. Every attempt is a :class:`WebhookAttempt` row.

Two tables are about endpoints, for two different things (``notifications.endpoints``):
``event_endpoints`` (:class:`EventEndpoint`) are the URLs an owner registered, and
``webhook_endpoints`` (:class:`EndpointHealth`) is the failure streak of any URL the outbox
delivers to, registered or an invoice's ``webhookUrl``, per owner.
"""

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
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.auth import OwnedSecret

# SQLite numbers rows itself only for an INTEGER PRIMARY KEY (64-bit there anyway).
SEQUENCE = BigInteger().with_variant(Integer(), "sqlite")
PING = "ping"


class EventStatus:
    """The status of one delivery (an outbox row)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


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


class WebhookEvent(Base):
    """One delivery to make: a row of the outbox (the table's name predates events)."""

    __tablename__ = "webhook_events"
    __table_args__ = (
        Index("ix_webhook_events_due", "status", "next_attempt_at"),
        # Housekeeping finds finished deliveries past the retention (notifications.retention).
        Index("ix_webhook_events_finished", "status", "created_at"),
    )

    # Sent as x-service-event-id by the paid webhook; stable across retries.
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # Null for an endpoint's test ping.
    invoice_pk: Mapped[str | None] = mapped_column(
        ForeignKey("invoices.id"), index=True, nullable=True
    )
    owner_key: Mapped[str] = mapped_column(String(42))
    url: Mapped[str] = mapped_column(String(2048))
    # The health key of the owner's URL (SHA-256 of owner and URL, notifications.endpoints)
    # and the URL's host:port.
    endpoint_key: Mapped[str] = mapped_column(String(64))
    endpoint_host: Mapped[str] = mapped_column(String(300))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[int] = mapped_column(BigInteger)
    # A worker that claimed the delivery owns it until this time (crash → another takes over).
    claimed_until: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger)
    delivered_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The event (``events.id``) this delivers, the endpoint it goes to (null: the invoice's
    # webhookUrl) and, for endpoints, the time after which a failed attempt is the last.
    event_id: Mapped[str | None] = mapped_column(String(36), index=True, nullable=True)
    endpoint_id: Mapped[str | None] = mapped_column(String(36), index=True, nullable=True)
    retry_until: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class WebhookAttempt(Base):
    """One attempt of a delivery (``event_id`` is the outbox row's id)."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(BigInteger)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


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


class EndpointHealth(Base):
    """An owner's URL whose latest attempts failed (a success deletes the row)."""

    __tablename__ = "webhook_endpoints"

    # SHA-256 of the owner and the URL, hex (``notifications.endpoints.endpoint_key``).
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    consecutive_failures: Mapped[int] = mapped_column(Integer)
    last_failure_at: Mapped[int] = mapped_column(BigInteger)


class WebhookSecret(OwnedSecret, Base):
    """One owner's webhook signing secret (``auth.secrets``: id, owner, created and revoked
    times); revoked ones stay listed."""

    __tablename__ = "webhook_secrets"
    __table_args__ = (Index("ix_webhook_secrets_owner_key_revoked_at", "owner_key", "revoked_at"),)

    # Fernet token of the secret (``auth.secrets``). Never the secret.
    secret_encrypted: Mapped[str] = mapped_column(Text)


class OwnerSettings(Base):
    """What an owner chose about the service's behaviour towards them (absent row: defaults)."""

    __tablename__ = "owner_settings"

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    webhook_api_key_header: Mapped[bool] = mapped_column(Boolean, server_default=true())
    updated_at: Mapped[int] = mapped_column(BigInteger)
    # The share of the amount due a payment may fall short by and still pay an invoice, in
    # basis points (0..500); copied into each invoice at creation (``invoices.create``).
    underpayment_tolerance_bps: Mapped[int] = mapped_column(Integer, server_default="0")
    # The ISO 4217 currency the dashboard reports amounts in (None: token amounts only).
    reporting_currency: Mapped[str | None] = mapped_column(String(3), nullable=True)
    # How long a paid invoice created with manual capture waits for its capture, and what
    # happens then: captured (true) or left for the owner to void (``invoices.capture``).
    capture_window_s: Mapped[int] = mapped_column(BigInteger, server_default="604800")
    capture_at_window_end: Mapped[bool] = mapped_column(Boolean, server_default=true())
