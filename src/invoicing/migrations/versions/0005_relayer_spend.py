"""relayer spend: meta-transactions (one pending per owner nonce, daily budget), fee ceiling

Revision ID: 0005_relayer_spend
Revises: 0004_partial_sweep_index
Create Date: 2026-11-23 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_relayer_spend"
down_revision: str | Sequence[str] | None = "0004_partial_sweep_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "meta_transactions",
        sa.Column("relayer_tx_id", sa.String(length=36), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("nonce", sa.String(length=80), nullable=False),
        sa.Column("request_hash", sa.String(length=66), nullable=False),
        sa.Column("holds_nonce", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["relayer_tx_id"],
            ["relayer_transactions.id"],
            name=op.f("fk_meta_transactions_relayer_tx_id_relayer_transactions"),
        ),
        sa.PrimaryKeyConstraint("relayer_tx_id", name=op.f("pk_meta_transactions")),
    )
    op.create_index(
        "ix_meta_transactions_budget",
        "meta_transactions",
        ["chain_id", "owner_key", "created_at"],
    )
    op.create_index(
        "ux_meta_transactions_pending",
        "meta_transactions",
        ["chain_id", "owner_key", "nonce"],
        unique=True,
        postgresql_where=sa.text("holds_nonce"),
        sqlite_where=sa.text("holds_nonce"),
    )
    with op.batch_alter_table("relayer_transactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("fee_ceiling_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relayer_transactions", schema=None) as batch_op:
        batch_op.drop_column("fee_ceiling_at")
    op.drop_index("ux_meta_transactions_pending", table_name="meta_transactions")
    op.drop_index("ix_meta_transactions_budget", table_name="meta_transactions")
    op.drop_table("meta_transactions")
