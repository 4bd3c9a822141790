"""owner_brands: the merchant's display name, accent colour and logo for the payment page

Revision ID: 0022_owner_brands
Revises: 0021_webhook_health_per_owner
Create Date: 2026-11-25 20:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_owner_brands"
down_revision: str | Sequence[str] | None = "0021_webhook_health_per_owner"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "owner_brands",
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("display_name", sa.String(length=64), nullable=True),
        sa.Column("accent_color", sa.String(length=7), nullable=True),
        sa.Column("text_color", sa.String(length=7), nullable=True),
        sa.Column("logo_png", sa.LargeBinary(), nullable=True),
        sa.Column("logo_sha256", sa.String(length=64), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_key", name=op.f("pk_owner_brands")),
    )
    op.create_index(
        op.f("ix_owner_brands_logo_sha256"), "owner_brands", ["logo_sha256"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_owner_brands_logo_sha256"), table_name="owner_brands")
    op.drop_table("owner_brands")
