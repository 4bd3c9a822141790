"""The rate of a paid invoice's asset in its owner's reporting currency (``invoices.fiat``)."""

from __future__ import annotations

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class PaidRate(Base):
    """The rate of an invoice's asset in its owner's reporting currency when it was paid."""

    __tablename__ = "invoice_paid_rates"

    invoice_pk: Mapped[str] = mapped_column(String(36), primary_key=True)
    currency: Mapped[str] = mapped_column(String(3))
    # Units of the currency per whole unit of the asset; None: the asset has no price in it.
    rate: Mapped[str | None] = mapped_column(String(100), nullable=True)
    source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    recorded_at: Mapped[int] = mapped_column(BigInteger)
