"""monitor shards: pass records and leases per shard; invoices.unreadable; no next_check_at

Revision ID: 0015_monitor_shards
Revises: 0014_relayer_budget
Create Date: 2026-11-25 19:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_monitor_shards"
down_revision: str | Sequence[str] | None = "0014_relayer_budget"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "monitor_shards",
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.BigInteger(), nullable=False),
        sa.Column("pending_at", sa.BigInteger(), nullable=False),
        sa.Column("expired_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "shard", name=op.f("pk_monitor_shards")),
    )
    op.create_table(
        "monitor_workers",
        sa.Column("chain_id", sa.BigInteger(), nullable=False),
        sa.Column("worker", sa.String(length=64), nullable=False),
        sa.Column("alive_until", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("chain_id", "worker", name=op.f("pk_monitor_workers")),
    )
    op.drop_index("ix_invoices_watch", table_name="invoices")
    # Plain ALTER TABLE on both databases (SQLite 3.35+ drops a column in place): a batch
    # copy of the table would lose the SQLite predicates of its partial indexes.
    op.add_column(
        "invoices",
        sa.Column("unreadable", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.drop_column("invoices", "next_check_at")
    op.add_column(
        "invoices",
        sa.Column("shard", sa.SmallInteger(), server_default="0", nullable=False),
    )
    # The shard is the id's last two hex digits modulo 64 (``invoices.coverage.shard_of``).
    if op.get_bind().dialect.name == "postgresql":
        digits = "('x' || substr(id, 35, 2))::bit(8)::int"
    else:
        hex_digit = "(instr('0123456789abcdef', lower(substr(id, {}, 1))) - 1)"
        digits = f"({hex_digit.format(35)} * 16 + {hex_digit.format(36)})"
    op.execute(f"UPDATE invoices SET shard = {digits} % 64")
    op.create_index(
        "ix_invoices_watched",
        "invoices",
        ["chain_id", "shard", "status"],
        unique=False,
        postgresql_where=sa.text("watch"),
        sqlite_where=sa.text("watch"),
    )


def downgrade() -> None:
    op.drop_index("ix_invoices_watched", table_name="invoices")
    op.drop_column("invoices", "shard")
    op.add_column(
        "invoices",
        sa.Column("next_check_at", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.drop_column("invoices", "unreadable")
    op.create_index(
        "ix_invoices_watch", "invoices", ["chain_id", "watch", "next_check_at"], unique=False
    )
    op.drop_table("monitor_workers")
    op.drop_table("monitor_shards")
