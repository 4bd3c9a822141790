"""Requests counted per key and fixed window (``invoicing.ratelimit``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base

MAX_KEY_LENGTH = 120


class RateLimitWindow(Base):
    """Requests counted for one key in one fixed window."""

    __tablename__ = "rate_limit_windows"

    key: Mapped[str] = mapped_column(String(MAX_KEY_LENGTH), primary_key=True)
    window_start_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    # The window's end: housekeeping deletes the rows of windows that are over.
    expires_at_ms: Mapped[int] = mapped_column(BigInteger, index=True)
