"""mail: owners' mail settings, payers' receipt requests and the mail outbox

Revision ID: 0070_mail
Revises: 0060_invoice_change_seq
Create Date: 2026-11-28 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0070_mail"
down_revision: str | Sequence[str] | None = "0060_invoice_change_seq"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "owner_mail_settings",
        sa.Column("owner_key", sa.String(42), primary_key=True),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("language", sa.String(16), server_default="en", nullable=False),
        sa.Column("receipts", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "mail_receipts",
        sa.Column("invoice_pk", sa.String(36), primary_key=True),
        sa.Column("owner_key", sa.String(42), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_key", sa.String(42), nullable=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("event_type", sa.String(40), nullable=False),
        sa.Column("recipient", sa.String(254), nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=False),
        sa.Column("claimed_until", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    op.create_index("ix_mail_outbox_owner_key", "mail_outbox", ["owner_key"])
    op.create_index("ix_mail_outbox_due", "mail_outbox", ["status", "next_attempt_at"])
    op.create_index("ix_mail_outbox_finished", "mail_outbox", ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("mail_outbox")
    op.drop_table("mail_receipts")
    op.drop_table("owner_mail_settings")
