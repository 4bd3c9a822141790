"""the payment seam: every payer authorization the relayer carried, by any method

Revision ID: 0024_relayed_authorizations
Revises: 0023_monitor_covering_index
Create Date: 2026-11-28 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024_relayed_authorizations"
down_revision: str | Sequence[str] | None = "0023_monitor_covering_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "relayed_authorizations",
        sa.Column("relayer_tx_id", sa.String(length=36), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("token", sa.String(length=42), nullable=False),
        sa.Column("payer", sa.String(length=42), nullable=False),
        sa.Column("nonce", sa.String(length=66), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("request_hash", sa.String(length=66), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["relayer_tx_id"],
            ["relayer_transactions.id"],
            name=op.f("fk_relayed_authorizations_relayer_tx_id_relayer_transactions"),
        ),
        sa.PrimaryKeyConstraint("relayer_tx_id", name=op.f("pk_relayed_authorizations")),
    )
    op.create_index(
        "ix_relayed_authorizations_key",
        "relayed_authorizations",
        ["chain_id", "token", "payer", "nonce"],
    )
    op.create_index(
        "ix_relayed_authorizations_payer",
        "relayed_authorizations",
        ["chain_id", "payer", "created_at"],
    )
    # What the relayer carried before: the gasless payments of invoices (each carried its
    # token's authorization; the token is the invoice's).
    op.execute(
        """
        INSERT INTO relayed_authorizations (relayer_tx_id, chain_id, token, payer, nonce, method,
            owner_key, request_hash, tx_hash, status, created_at, updated_at)
        SELECT g.relayer_tx_id, g.chain_id, t.to_address, g.payer, g.nonce, 'eip3009',
            COALESCE(t.owner_key, ''), g.request_hash, g.tx_hash, g.status, g.created_at,
            g.updated_at
        FROM gasless_payments g JOIN relayer_transactions t ON t.id = g.relayer_tx_id
        """
    )


def downgrade() -> None:
    op.drop_index("ix_relayed_authorizations_payer", table_name="relayed_authorizations")
    op.drop_index("ix_relayed_authorizations_key", table_name="relayed_authorizations")
    op.drop_table("relayed_authorizations")
