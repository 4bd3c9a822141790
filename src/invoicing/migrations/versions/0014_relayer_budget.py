"""relayer budget: spend per chain, share and UTC day; owners set aside; owner of a transaction

Revision ID: 0014_relayer_budget
Revises: 0013_events
Create Date: 2026-11-25 17:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_relayer_budget"
down_revision: str | Sequence[str] | None = "0013_events"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "relayer_spend",
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("day_start_ms", sa.BigInteger(), nullable=False),
        sa.Column("share_key", sa.String(length=42), nullable=False),
        sa.Column("transactions", sa.Integer(), nullable=False),
        sa.Column("gas", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "chain_id", "day_start_ms", "share_key", name=op.f("pk_relayer_spend")
        ),
    )
    op.create_table(
        "relayer_owners_set_aside",
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("reverts", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("next_retry_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "owner_key", name=op.f("pk_relayer_owners_set_aside")),
    )
    with op.batch_alter_table("relayer_transactions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner_key", sa.String(length=42), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("relayer_transactions", schema=None) as batch_op:
        batch_op.drop_column("owner_key")
    op.drop_table("relayer_owners_set_aside")
    op.drop_table("relayer_spend")
