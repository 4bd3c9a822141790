"""invoices.redirect_url and cancel_url: where the payment page sends the payer back

Revision ID: 0019_invoice_links
Revises: 0018_dashboard_sessions
Create Date: 2026-11-25 19:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_invoice_links"
down_revision: str | Sequence[str] | None = "0018_dashboard_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain nullable ADD COLUMNs (no table rebuild on SQLite, no rewrite on PostgreSQL).
    op.add_column("invoices", sa.Column("redirect_url", sa.String(length=2048), nullable=True))
    op.add_column("invoices", sa.Column("cancel_url", sa.String(length=2048), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invoices", schema=None) as batch_op:
        batch_op.drop_column("cancel_url")
        batch_op.drop_column("redirect_url")
