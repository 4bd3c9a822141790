"""subscriptions: what an owner offers and a payer authorizes once, and each period's charge

Revision ID: 0030_subscriptions
Revises: 0025_invoice_balance_block
Create Date: 2026-12-01 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_subscriptions"
down_revision: str | Sequence[str] | None = "0025_invoice_balance_block"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_address", sa.String(length=42), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("subscription_ref", sa.String(length=128), nullable=True),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=False),
        sa.Column("decimals", sa.Integer(), nullable=False),
        sa.Column("amount", sa.String(length=100), nullable=False),
        sa.Column("amount_raw", sa.String(length=80), nullable=False),
        sa.Column("period_seconds", sa.BigInteger(), nullable=False),
        sa.Column("start_s", sa.BigInteger(), nullable=False),
        sa.Column("max_periods", sa.BigInteger(), nullable=False),
        sa.Column("salt", sa.String(length=66), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("redirect_url", sa.Text(), nullable=True),
        sa.Column("cancel_url", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("payer", sa.String(length=42), nullable=True),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("onchain_id", sa.String(length=66), nullable=True),
        sa.Column("next_period", sa.BigInteger(), nullable=False),
        sa.Column("failed_periods", sa.Integer(), nullable=False),
        sa.Column("retry_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("cancelled_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("owner_key", "subscription_ref", name="uq_subscriptions_owner_ref"),
    )
    op.create_index("ix_subscriptions_owner", "subscriptions", ["owner_key", "created_at"])
    op.create_index("ix_subscriptions_due", "subscriptions", ["status", "chain_id"])
    op.create_table(
        "subscription_charges",
        sa.Column("subscription_pk", sa.String(length=36), nullable=False),
        sa.Column("period", sa.BigInteger(), nullable=False),
        sa.Column("invoice_pk", sa.String(length=36), nullable=False),
        sa.Column("payment_address", sa.String(length=42), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=True),
        sa.Column("tx_hash", sa.String(length=66), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["subscription_pk"],
            ["subscriptions.id"],
            name=op.f("fk_subscription_charges_subscription_pk_subscriptions"),
        ),
        sa.ForeignKeyConstraint(
            ["invoice_pk"],
            ["invoices.id"],
            name=op.f("fk_subscription_charges_invoice_pk_invoices"),
        ),
        sa.PrimaryKeyConstraint("subscription_pk", "period", name=op.f("pk_subscription_charges")),
    )
    op.create_index("ix_subscription_charges_invoice", "subscription_charges", ["invoice_pk"])


def downgrade() -> None:
    op.drop_index("ix_subscription_charges_invoice", table_name="subscription_charges")
    op.drop_table("subscription_charges")
    op.drop_index("ix_subscriptions_due", table_name="subscriptions")
    op.drop_index("ix_subscriptions_owner", table_name="subscriptions")
    op.drop_table("subscriptions")
