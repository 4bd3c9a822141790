"""The monitor's tables: each chain's shards of watched invoices, their leases and last
passes, and the workers that share them (``monitor.shards``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base

SHARDS = 64


class MonitorShard(Base):
    """One shard of a chain's watched invoices: its lease and its last passes."""

    __tablename__ = "monitor_shards"

    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The worker leasing the shard, and until when (ms); expired or None: free to take.
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[int] = mapped_column(BigInteger, default=0)
    # When the last pass over every pending watched invoice of the shard started, and the
    # last over every expired one still watched (the late-payment window's lower rate).
    pending_at: Mapped[int] = mapped_column(BigInteger, default=0)
    expired_at: Mapped[int] = mapped_column(BigInteger, default=0)


class MonitorWorker(Base):
    """A worker watching a chain, alive until ``alive_until`` unless it says so again: the
    number of live workers sets each one's share of the shards (``monitor.shards``)."""

    __tablename__ = "monitor_workers"

    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    worker: Mapped[str] = mapped_column(String(64), primary_key=True)
    alive_until: Mapped[int] = mapped_column(BigInteger)


def shard_of(invoice_id: str) -> int:
    """The shard of an invoice: its id's last two hex digits, modulo ``SHARDS``."""
    return int(invoice_id[-2:], 16) % SHARDS
