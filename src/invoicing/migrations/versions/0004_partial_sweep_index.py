"""invoices: the sweep index on PostgreSQL leaves out pending invoices

A monitor claim rewrites every due invoice's row; ``next_check_at`` is indexed, so PostgreSQL
cannot make that a HOT update and writes an entry into every index of the table. The sweep
index serves only the withdrawal queries, which never look for pending invoices, so leaving
them out saves one index entry per claimed invoice. SQLite updates only the indexes whose
columns change, so its index stays as it was.

Revision ID: 0004_partial_sweep_index
Revises: 0003_webhook_endpoints
Create Date: 2026-11-22 05:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_partial_sweep_index"
down_revision: str | Sequence[str] | None = "0003_webhook_endpoints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ["chain_id", "status", "withdrawn"]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_invoices_sweep", table_name="invoices")
    op.create_index(
        "ix_invoices_sweep",
        "invoices",
        COLUMNS,
        postgresql_where=sa.text("status <> 'pending'"),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("ix_invoices_sweep", table_name="invoices")
    op.create_index("ix_invoices_sweep", "invoices", COLUMNS)
