"""invoices: a change number on every write a monitor pass must see

Revision ID: 0060_invoice_change_seq
Revises: 0055_reporting_currency
Create Date: 2026-11-28 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0060_invoice_change_seq"
down_revision: str | Sequence[str] | None = "0055_reporting_currency"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What a pending pass reads of an invoice (``monitor.changes``): a write of any of these
# gives the row a new change number, in the writing transaction.
WATCHED = "status, watch, balance_raw, required_raw, expires_at, unreadable, payment_address"

PG_FUNCTION = """
CREATE FUNCTION invoices_change_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_seq := pg_current_xact_id()::text::bigint;
    RETURN NEW;
END
$$
"""
PG_TRIGGER = f"""
CREATE TRIGGER invoices_change_seq BEFORE INSERT OR UPDATE OF {WATCHED} ON invoices
FOR EACH ROW EXECUTE FUNCTION invoices_change_seq()
"""
# SQLite: writers take turns, so one more than the chain's highest orders the changes.
SQLITE_SET = """
    UPDATE invoices SET change_seq = (
        SELECT coalesce(max(change_seq), 0) + 1 FROM invoices WHERE chain_id = NEW.chain_id
    ) WHERE rowid = NEW.rowid;
"""
SQLITE_TRIGGERS = (
    f"CREATE TRIGGER invoices_change_seq_insert AFTER INSERT ON invoices BEGIN {SQLITE_SET} END",
    f"CREATE TRIGGER invoices_change_seq_update AFTER UPDATE OF {WATCHED} ON invoices "
    f"BEGIN {SQLITE_SET} END",
)


def upgrade() -> None:
    # 0 on existing rows: a worker loads its shards whole before it reads changes.
    op.add_column(
        "invoices",
        sa.Column("change_seq", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.create_index("ix_invoices_changes", "invoices", ["chain_id", "change_seq"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        op.execute(PG_TRIGGER)
    else:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER invoices_change_seq ON invoices")
        op.execute("DROP FUNCTION invoices_change_seq()")
    else:
        op.execute("DROP TRIGGER invoices_change_seq_insert")
        op.execute("DROP TRIGGER invoices_change_seq_update")
    op.drop_index("ix_invoices_changes", table_name="invoices")
    op.drop_column("invoices", "change_seq")
