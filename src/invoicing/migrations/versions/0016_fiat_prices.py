"""fiat prices and underpayment tolerance: the price locked into each invoice, the owner's
tolerance and what an invoice paid under it fell short by

Revision ID: 0016_fiat_prices
Revises: 0015_monitor_shards
Create Date: 2026-11-25 19:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_fiat_prices"
down_revision: str | Sequence[str] | None = "0015_monitor_shards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INVOICE_COLUMNS = (
    ("currency", sa.String(length=3)),
    ("fiat_amount", sa.String(length=40)),
    ("rate", sa.String(length=100)),
    ("rate_source", sa.String(length=16)),
    ("feed_address", sa.String(length=42)),
    ("feed_round_id", sa.String(length=30)),
    ("feed_updated_at", sa.BigInteger()),
)


def upgrade() -> None:
    # Plain ADD COLUMNs (no table rebuild on SQLite); existing invoices have no fiat price
    # and no tolerance.
    for name, kind in _INVOICE_COLUMNS:
        op.add_column("invoices", sa.Column(name, kind, nullable=True))
    op.add_column(
        "invoices", sa.Column("tolerance_bps", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("invoices", sa.Column("shortfall_raw", sa.String(length=80), nullable=True))
    op.add_column(
        "owner_settings",
        sa.Column("underpayment_tolerance_bps", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("owner_settings", schema=None) as batch_op:
        batch_op.drop_column("underpayment_tolerance_bps")
    with op.batch_alter_table("invoices", schema=None) as batch_op:
        for name in ("shortfall_raw", "tolerance_bps", *(n for n, _ in _INVOICE_COLUMNS)):
            batch_op.drop_column(name)
