"""API keys and the replay guard of signature mode."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.auth.secrets import OwnedSecret
from invoicing.db import Base


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


class UsedRequestTimestamp(Base):
    """A (owner, timestamp) pair already accepted in signature mode."""

    __tablename__ = "used_request_timestamps"
    __table_args__ = (Index("ix_used_request_timestamps_expires", "expires_at"),)

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    timestamp_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    expires_at: Mapped[int] = mapped_column(BigInteger)
