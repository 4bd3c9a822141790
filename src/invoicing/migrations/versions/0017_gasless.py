"""gasless payments: owners' opt-ins per chain, relayed transfer authorizations

Revision ID: 0017_gasless
Revises: 0016_fiat_prices
Create Date: 2026-11-25 19:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_gasless"
down_revision: str | Sequence[str] | None = "0016_fiat_prices"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gasless_opt_ins",
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_key", "chain_id", name=op.f("pk_gasless_opt_ins")),
    )
    op.create_table(
        "gasless_payments",
        sa.Column("relayer_tx_id", sa.String(length=36), nullable=False),
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("payer", sa.String(length=42), nullable=False),
        sa.Column("nonce", sa.String(length=66), nullable=False),
        sa.Column("value_raw", sa.String(length=80), nullable=False),
        sa.Column("valid_before", sa.BigInteger(), nullable=False),
        sa.Column("request_hash", sa.String(length=66), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_gasless_payments_invoice_id_invoices")
        ),
        sa.ForeignKeyConstraint(
            ["relayer_tx_id"],
            ["relayer_transactions.id"],
            name=op.f("fk_gasless_payments_relayer_tx_id_relayer_transactions"),
        ),
        sa.PrimaryKeyConstraint("relayer_tx_id", name=op.f("pk_gasless_payments")),
    )
    op.create_index("ix_gasless_payments_invoice", "gasless_payments", ["invoice_id", "created_at"])
    op.create_index(
        "ix_gasless_payments_authorization", "gasless_payments", ["chain_id", "payer", "nonce"]
    )


def downgrade() -> None:
    op.drop_index("ix_gasless_payments_authorization", table_name="gasless_payments")
    op.drop_index("ix_gasless_payments_invoice", table_name="gasless_payments")
    op.drop_table("gasless_payments")
    op.drop_table("gasless_opt_ins")
