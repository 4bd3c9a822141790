"""payments of record keep their block's time

Revision ID: 0072_payment_block_time
Revises: 0071_team_members
Create Date: 2026-11-28 12:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0072_payment_block_time"
down_revision: str | Sequence[str] | None = "0071_team_members"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Null on records made before: the report then takes when they were recorded.
    op.add_column("payment_records", sa.Column("block_time", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("payment_records", "block_time")
