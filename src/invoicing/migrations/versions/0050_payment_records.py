"""payments of record, the scans that find them, and refunds paid from the owner's wallet

Revision ID: 0050_payment_records
Revises: 0040_manual_capture
Create Date: 2026-12-01 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0050_payment_records"
down_revision: str | Sequence[str] | None = "0040_manual_capture"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "payment_records",
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("source", sa.String(length=80), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("from_address", sa.String(length=42), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=True),
        sa.Column("amount_raw", sa.String(length=80), nullable=False),
        sa.Column("block_number", sa.BigInteger(), nullable=False),
        sa.Column("block_hash", sa.String(length=66), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"],
            ["invoices.id"],
            name=op.f("fk_payment_records_invoice_id_invoices"),
        ),
        sa.PrimaryKeyConstraint("invoice_id", "tx_hash", "source", name=op.f("pk_payment_records")),
    )
    op.create_index("ix_payment_records_from", "payment_records", ["from_address"])
    op.create_index("ix_payment_records_tx", "payment_records", ["tx_hash"])
    op.create_index(
        "ix_payment_records_unfinal", "payment_records", ["chain_id", "final", "block_number"]
    )
    op.create_table(
        "payment_scans",
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("from_block", sa.BigInteger(), nullable=False),
        sa.Column("to_block", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"],
            ["invoices.id"],
            name=op.f("fk_payment_scans_invoice_id_invoices"),
        ),
        sa.PrimaryKeyConstraint("invoice_id", name=op.f("pk_payment_scans")),
    )
    op.create_index("ix_payment_scans_chain", "payment_scans", ["chain_id"])
    op.create_table(
        "wallet_refunds",
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("from_address", sa.String(length=42), nullable=False),
        sa.Column("to_address", sa.String(length=42), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=True),
        sa.Column("amount_raw", sa.String(length=80), nullable=False),
        sa.Column("block_number", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"],
            ["invoices.id"],
            name=op.f("fk_wallet_refunds_invoice_id_invoices"),
        ),
        sa.PrimaryKeyConstraint("tx_hash", name=op.f("pk_wallet_refunds")),
    )
    op.create_index("ix_wallet_refunds_invoice", "wallet_refunds", ["invoice_id", "created_at"])


def downgrade() -> None:
    op.drop_table("wallet_refunds")
    op.drop_table("payment_scans")
    op.drop_table("payment_records")
