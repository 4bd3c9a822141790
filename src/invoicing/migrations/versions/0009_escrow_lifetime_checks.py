"""escrows watched for life: the low-rate check time, and the assets found in escrows

``invoices.lifetime_check_at`` is when the low-rate pass next reads every allow-listed asset
of the escrow (existing invoices are first due at their expiry, then once per interval);
``escrow_assets`` holds the non-zero balances it (or a sweep) found.

Revision ID: 0009_escrow_lifetime_checks
Revises: 0008_refunds
Create Date: 2026-11-23 18:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_escrow_lifetime_checks"
down_revision: str | Sequence[str] | None = "0008_refunds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild on SQLite, whose rebuild of a table that others
    # reference would fail); the server default stays, and new rows get theirs from create.
    op.add_column(
        "invoices",
        sa.Column("lifetime_check_at", sa.BigInteger(), nullable=False, server_default="0"),
    )
    # Existing escrows are first read once they expire (the window is a setting, unknown
    # here): a pending invoice's escrow is not read before its expiry.
    op.execute("UPDATE invoices SET lifetime_check_at = expires_at")
    op.create_index("ix_invoices_lifetime_check", "invoices", ["chain_id", "lifetime_check_at"])
    op.create_table(
        "escrow_assets",
        sa.Column("invoice_id", sa.String(length=36), nullable=False),
        sa.Column("token_address", sa.String(length=42), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("own", sa.Boolean(), nullable=False),
        sa.Column("balance_raw", sa.String(length=80), nullable=False),
        sa.Column("seen_at", sa.BigInteger(), nullable=False),
        sa.Column("attempted_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_escrow_assets_invoice_id_invoices")
        ),
        sa.PrimaryKeyConstraint("invoice_id", "token_address", name=op.f("pk_escrow_assets")),
    )
    with op.batch_alter_table("escrow_assets", schema=None) as batch_op:
        batch_op.create_index("ix_escrow_assets_chain", ["chain_id", "own"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("escrow_assets", schema=None) as batch_op:
        batch_op.drop_index("ix_escrow_assets_chain")
    op.drop_table("escrow_assets")
    op.drop_index("ix_invoices_lifetime_check", table_name="invoices")
    with op.batch_alter_table("invoices", schema=None) as batch_op:
        batch_op.drop_column("lifetime_check_at")
