"""webhook signing secrets, owner settings, and the index housekeeping prunes events by

Revision ID: 0012_webhook_signing
Revises: 0010_invoice_has_extras
Create Date: 2026-11-23 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_webhook_signing"
down_revision: str | Sequence[str] | None = "0010_invoice_has_extras"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_secrets",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("secret_encrypted", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_secrets")),
    )
    op.create_index(
        "ix_webhook_secrets_owner_key_revoked_at",
        "webhook_secrets",
        ["owner_key", "revoked_at"],
    )
    op.create_table(
        "owner_settings",
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("webhook_api_key_header", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_key", name=op.f("pk_owner_settings")),
    )
    op.create_index("ix_webhook_events_finished", "webhook_events", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_events_finished", table_name="webhook_events")
    op.drop_table("owner_settings")
    op.drop_index("ix_webhook_secrets_owner_key_revoked_at", table_name="webhook_secrets")
    op.drop_table("webhook_secrets")
