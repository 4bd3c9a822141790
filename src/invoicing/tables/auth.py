"""API keys, the replay guard of signature mode, dashboard sessions and team members."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class OwnedSecret:
    """The columns every owner secret's row has (a declarative mixin)."""

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_key: Mapped[str] = mapped_column(String(42))
    created_at: Mapped[int] = mapped_column(BigInteger)
    revoked_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class ApiKey(OwnedSecret, Base):
    """An owner's API key (``auth.secrets``: id, owner, created and revoked times)."""

    __tablename__ = "api_keys"

    owner_address: Mapped[str] = mapped_column(String(42))
    owner_key: Mapped[str] = mapped_column(String(42), index=True)
    label: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # sha256 of the key: how a presented key is found. Never the key itself.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The key sealed with the server secret, only to put it in webhook headers.
    key_encrypted: Mapped[str] = mapped_column(Text)
    # When a request last used the key, to the minute (``api_keys.lookup_active_key``).
    last_used_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class UsedRequestTimestamp(Base):
    """A (owner, timestamp) pair already accepted in signature mode."""

    __tablename__ = "used_request_timestamps"
    __table_args__ = (Index("ix_used_request_timestamps_expires", "expires_at"),)

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    timestamp_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    expires_at: Mapped[int] = mapped_column(BigInteger)


class DashboardSession(Base):
    """A signed-in dashboard browser (``auth.sign_in``): found by the SHA-256 of its cookie,
    revocable, expiring; its CSRF token goes with every state-changing request."""

    __tablename__ = "dashboard_sessions"
    __table_args__ = (Index("ix_dashboard_sessions_owner", "owner_key", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    owner_address: Mapped[str] = mapped_column(String(42))
    owner_key: Mapped[str] = mapped_column(String(42))
    csrf_token: Mapped[str] = mapped_column(String(64))
    # How it signed in: "siwe" (a wallet's EIP-4361 signature) or "link" (dashboard-link).
    method: Mapped[str] = mapped_column(String(8))
    chain_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    user_agent: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    last_seen_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int] = mapped_column(BigInteger, index=True)
    revoked_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # A member's session (``auth.team``): the wallet that signed in, acting on owner_key's
    # account within its current role; null: the owner's own session.
    member_key: Mapped[str | None] = mapped_column(String(42), nullable=True)


class SignInTicket(Base):
    """A single-use way in, stored as its SHA-256: a SIWE nonce (any wallet may sign it) or
    a login link's token (for one owner). Deleted when used or expired."""

    __tablename__ = "dashboard_sign_in_tickets"

    ticket_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # "nonce" or "link"
    owner_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    expires_at: Mapped[int] = mapped_column(BigInteger, index=True)


class TeamMember(Base):
    """A wallet that acts on an owner's account in the dashboard, within its role
    (``auth.team``)."""

    __tablename__ = "team_members"
    __table_args__ = (Index("ix_team_members_member", "member_key"),)

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    member_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    member_address: Mapped[str] = mapped_column(String(42))
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
