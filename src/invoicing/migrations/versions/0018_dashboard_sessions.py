"""dashboard: sessions and single-use sign-in tickets (SIWE nonces, login links)

Revision ID: 0018_dashboard_sessions
Revises: 0017_gasless
Create Date: 2026-11-25 19:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_dashboard_sessions"
down_revision: str | Sequence[str] | None = "0017_gasless"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("owner_address", sa.String(length=42), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("chain_id", sa.BigInteger(), nullable=True),
        sa.Column("user_agent", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dashboard_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_dashboard_sessions_token_hash")),
    )
    op.create_index(
        "ix_dashboard_sessions_owner", "dashboard_sessions", ["owner_key", "created_at"]
    )
    op.create_index(op.f("ix_dashboard_sessions_expires_at"), "dashboard_sessions", ["expires_at"])
    op.create_table(
        "dashboard_sign_in_tickets",
        sa.Column("ticket_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("owner_address", sa.String(length=42), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("ticket_hash", name=op.f("pk_dashboard_sign_in_tickets")),
    )
    op.create_index(
        op.f("ix_dashboard_sign_in_tickets_expires_at"),
        "dashboard_sign_in_tickets",
        ["expires_at"],
    )


def downgrade() -> None:
    op.drop_table("dashboard_sign_in_tickets")
    op.drop_table("dashboard_sessions")
