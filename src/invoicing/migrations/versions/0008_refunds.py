"""refunds: owner-signed refunds relayed from invoice escrows

One row per relayed ``refundMeta``, with its status (submitted, confirmed, failed). A
submitted refund holds its escrow: withdrawals leave it alone until the refund is final.

Revision ID: 0008_refunds
Revises: 0007_parked_escrows
Create Date: 2026-11-23 18:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_refunds"
down_revision: str | Sequence[str] | None = "0007_parked_escrows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "refunds",
        sa.Column("relayer_tx_id", sa.String(length=36), nullable=False),
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("to_address", sa.String(length=42), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=True),
        sa.Column("amount_raw", sa.String(length=80), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_refunds_invoice_id_invoices")
        ),
        sa.ForeignKeyConstraint(
            ["relayer_tx_id"],
            ["relayer_transactions.id"],
            name=op.f("fk_refunds_relayer_tx_id_relayer_transactions"),
        ),
        sa.PrimaryKeyConstraint("relayer_tx_id", name=op.f("pk_refunds")),
    )
    with op.batch_alter_table("refunds", schema=None) as batch_op:
        batch_op.create_index("ix_refunds_invoice", ["invoice_id", "created_at"], unique=False)
        batch_op.create_index("ix_refunds_status", ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("refunds", schema=None) as batch_op:
        batch_op.drop_index("ix_refunds_status")
        batch_op.drop_index("ix_refunds_invoice")
    op.drop_table("refunds")
