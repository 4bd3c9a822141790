"""invoices.has_extras: the escrow has refunds or other assets, so owner views read them

Owner representations (create, status, list) show ``refunds`` and ``otherBalances``; the flag
lets every other invoice skip those reads. Existing rows are set from the two tables.

Revision ID: 0010_invoice_has_extras
Revises: 0009_escrow_lifetime_checks
Create Date: 2026-11-23 18:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_invoice_has_extras"
down_revision: str | Sequence[str] | None = "0009_escrow_lifetime_checks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN, as in 0009 (no table rebuild on SQLite).
    op.add_column(
        "invoices",
        sa.Column("has_extras", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.execute(
        "UPDATE invoices SET has_extras = TRUE WHERE id IN (SELECT invoice_id FROM refunds) "
        "OR id IN (SELECT invoice_id FROM escrow_assets WHERE own = FALSE)"
    )


def downgrade() -> None:
    with op.batch_alter_table("invoices", schema=None) as batch_op:
        batch_op.drop_column("has_extras")
