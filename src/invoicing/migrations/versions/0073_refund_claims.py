"""refund claim links: a payer names the refund's address, the owner's signature approves it

Revision ID: 0073_refund_claims
Revises: 0072_payment_block_time
Create Date: 2026-11-28 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0073_refund_claims"
down_revision: str | Sequence[str] | None = "0072_payment_block_time"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "refund_claims",
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("address", sa.String(length=42), nullable=True),
        sa.Column("claimed_at", sa.BigInteger(), nullable=True),
        sa.Column("approved_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["invoice_id"], ["invoices.id"]),
        sa.PrimaryKeyConstraint("invoice_id"),
    )
    op.create_index("ix_refund_claims_token", "refund_claims", ["token_hash"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_refund_claims_token", table_name="refund_claims")
    op.drop_table("refund_claims")
