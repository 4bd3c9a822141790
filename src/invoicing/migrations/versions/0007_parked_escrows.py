"""settlement: parked escrows, and what each sweep moved per escrow

An escrow whose withdraw does not simulate on its own, or whose confirmed sweep moved
nothing, is parked with its reason and retried with backoff (``parked_escrows``).
``withdrawal_items.moved_raw`` records what a confirmed sweep took from each escrow.

Revision ID: 0007_parked_escrows
Revises: 0006_rate_limits_and_watch_cap
Create Date: 2026-11-23 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_parked_escrows"
down_revision: str | Sequence[str] | None = "0006_rate_limits_and_watch_cap"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "parked_escrows",
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("owner_address", sa.String(length=42), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=True),
        sa.Column("payment_address", sa.String(length=42), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("balance_raw", sa.String(length=80), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_retry_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_parked_escrows_invoice_id_invoices")
        ),
        sa.PrimaryKeyConstraint("invoice_id", name=op.f("pk_parked_escrows")),
    )
    with op.batch_alter_table("parked_escrows", schema=None) as batch_op:
        batch_op.create_index(
            "ix_parked_escrows_retry", ["chain_id", "next_retry_at"], unique=False
        )
    with op.batch_alter_table("withdrawal_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("moved_raw", sa.String(length=80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("withdrawal_items", schema=None) as batch_op:
        batch_op.drop_column("moved_raw")
    with op.batch_alter_table("parked_escrows", schema=None) as batch_op:
        batch_op.drop_index("ix_parked_escrows_retry")
    op.drop_table("parked_escrows")
