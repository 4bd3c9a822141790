"""invoices: the block each stored balance was read at

Revision ID: 0025_invoice_balance_block
Revises: 0024_relayed_authorizations
Create Date: 2026-11-27 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_invoice_balance_block"
down_revision: str | Sequence[str] | None = "0024_relayed_authorizations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # 0 on existing rows: any later reading is stored over their balance, as before.
    op.add_column(
        "invoices",
        sa.Column("balance_block", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("invoices", "balance_block")
