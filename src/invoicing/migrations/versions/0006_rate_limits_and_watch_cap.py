"""rate limits for every route family; the index of an owner's watched invoices

The fee routes' counters (``fee_rate_limits``) become the general ``rate_limit_windows``:
each row now records when its window ends, so housekeeping deletes the rows of windows that
are over instead of every request deleting them. Counters are transient; the old rows are
dropped, not copied. The partial index ``ix_invoices_owner_watched`` holds only watched
invoices, so the per-owner cap on watched invoices is an index count.

Revision ID: 0006_rate_limits_and_watch_cap
Revises: 0005_relayer_spend
Create Date: 2026-11-23 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_rate_limits_and_watch_cap"
down_revision: str | Sequence[str] | None = "0005_relayer_spend"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("fee_rate_limits")
    op.create_table(
        "rate_limit_windows",
        sa.Column("key", sa.String(length=120), nullable=False),
        sa.Column("window_start_ms", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window_start_ms", name=op.f("pk_rate_limit_windows")),
    )
    op.create_index(
        op.f("ix_rate_limit_windows_expires_at_ms"), "rate_limit_windows", ["expires_at_ms"]
    )
    op.create_index(
        "ix_invoices_owner_watched",
        "invoices",
        ["owner_key"],
        postgresql_where=sa.text("watch"),
        sqlite_where=sa.text("watch"),
    )


def downgrade() -> None:
    op.drop_index("ix_invoices_owner_watched", table_name="invoices")
    op.drop_index(op.f("ix_rate_limit_windows_expires_at_ms"), table_name="rate_limit_windows")
    op.drop_table("rate_limit_windows")
    op.create_table(
        "fee_rate_limits",
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("window_start_ms", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window_start_ms", name=op.f("pk_fee_rate_limits")),
    )
