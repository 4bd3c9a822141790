"""``owner_brands``: one row per owner who set any part of a brand (absent: no brand)."""

from __future__ import annotations

from sqlalchemy import BigInteger, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base


class OwnerBrand(Base):
    __tablename__ = "owner_brands"

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    display_name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # ``#rrggbb`` (lower case), and the text colour chosen for it (``brand.colors``).
    accent_color: Mapped[str | None] = mapped_column(String(7), nullable=True)
    text_color: Mapped[str | None] = mapped_column(String(7), nullable=True)
    # The PNG the service wrote (``brand.logo``) and its sha256 (hex): the logo's public URL.
    logo_png: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    logo_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    updated_at: Mapped[int] = mapped_column(BigInteger)
