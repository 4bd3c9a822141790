"""invoices: manual capture and void; owners: the capture window; refunds: voids

Revision ID: 0040_manual_capture
Revises: 0030_subscriptions
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040_manual_capture"
down_revision: str | Sequence[str] | None = "0030_subscriptions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing invoices were all captured when paid.
    op.add_column(
        "invoices",
        sa.Column("capture", sa.String(16), server_default="automatic", nullable=False),
    )
    op.add_column("invoices", sa.Column("captured_at", sa.BigInteger(), nullable=True))
    op.add_column("invoices", sa.Column("voided_at", sa.BigInteger(), nullable=True))
    op.add_column(
        "owner_settings",
        sa.Column("capture_window_s", sa.BigInteger(), server_default="604800", nullable=False),
    )
    op.add_column(
        "owner_settings",
        sa.Column("capture_at_window_end", sa.Boolean(), server_default=sa.true(), nullable=False),
    )
    op.add_column(
        "refunds", sa.Column("voids", sa.Boolean(), server_default=sa.false(), nullable=False)
    )


def downgrade() -> None:
    op.drop_column("refunds", "voids")
    op.drop_column("owner_settings", "capture_at_window_end")
    op.drop_column("owner_settings", "capture_window_s")
    op.drop_column("invoices", "voided_at")
    op.drop_column("invoices", "captured_at")
    op.drop_column("invoices", "capture")
