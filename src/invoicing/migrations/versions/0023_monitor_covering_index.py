"""monitor: the watched-invoices index covers what a pending pass reads

Revision ID: 0023_monitor_covering_index
Revises: 0022_owner_brands
Create Date: 2026-11-25 23:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_monitor_covering_index"
down_revision: str | Sequence[str] | None = "0022_owner_brands"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns as they are in this revision (``models.WATCHED_INDEX_COLUMNS`` may move on).
COLUMNS = [
    "chain_id",
    "status",
    "shard",
    "token_address",
    "payment_address",
    "expires_at",
    "balance_raw",
    "required_raw",
    "unreadable",
]


def upgrade() -> None:
    op.drop_index("ix_invoices_watched", table_name="invoices")
    op.create_index(
        "ix_invoices_watched",
        "invoices",
        COLUMNS,
        unique=False,
        postgresql_where=sa.text("watch"),
        sqlite_where=sa.text("watch"),
    )


def downgrade() -> None:
    op.drop_index("ix_invoices_watched", table_name="invoices")
    op.create_index(
        "ix_invoices_watched",
        "invoices",
        ["chain_id", "shard", "status"],
        unique=False,
        postgresql_where=sa.text("watch"),
        sqlite_where=sa.text("watch"),
    )
