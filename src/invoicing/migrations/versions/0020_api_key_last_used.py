"""api keys: when each was last used (to the minute), shown to its owner

Revision ID: 0020_api_key_last_used
Revises: 0019_invoice_links
Create Date: 2026-11-25 20:25:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_api_key_last_used"
down_revision: str | Sequence[str] | None = "0019_invoice_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("last_used_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "last_used_at")
