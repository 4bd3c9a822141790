"""Request counters for the rate-limited client-facing fee routes (shared by all processes)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class RateLimitWindow(Base):
    """Requests seen for one key (client IP or owner) in one fixed one-minute window."""

    __tablename__ = "fee_rate_limits"

    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    window_start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
