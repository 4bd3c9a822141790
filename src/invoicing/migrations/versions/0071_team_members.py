"""team members, and the member a dashboard session belongs to

Revision ID: 0071_team_members
Revises: 0070_mail
Create Date: 2026-11-28 10:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0071_team_members"
down_revision: str | Sequence[str] | None = "0070_mail"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "team_members",
        sa.Column("owner_key", sa.String(42), primary_key=True),
        sa.Column("member_key", sa.String(42), primary_key=True),
        sa.Column("member_address", sa.String(42), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_team_members_member", "team_members", ["member_key"])
    # Null on existing rows: every session so far is its owner's own.
    op.add_column("dashboard_sessions", sa.Column("member_key", sa.String(42), nullable=True))


def downgrade() -> None:
    op.drop_column("dashboard_sessions", "member_key")
    op.drop_table("team_members")
