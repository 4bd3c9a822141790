"""owner_settings.reporting_currency and invoice_paid_rates: fiat values for the dashboard

Revision ID: 0055_reporting_currency
Revises: 0050_payment_records
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0055_reporting_currency"
down_revision: str | Sequence[str] | None = "0050_payment_records"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "owner_settings", sa.Column("reporting_currency", sa.String(length=3), nullable=True)
    )
    op.create_table(
        "invoice_paid_rates",
        sa.Column("invoice_pk", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("rate", sa.String(length=100), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=True),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("invoice_pk", name=op.f("pk_invoice_paid_rates")),
    )
    op.create_index("ix_invoices_paid", "invoices", ["chain_id", "paid_at"])


def downgrade() -> None:
    op.drop_index("ix_invoices_paid", table_name="invoices")
    op.drop_table("invoice_paid_rates")
    op.drop_column("owner_settings", "reporting_currency")
