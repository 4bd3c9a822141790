"""the payments report's month reads an index of the records' block time

Revision ID: 0075_payment_paid_at_index
Revises: 0074_subscription_webhook_url
Create Date: 2026-11-28 15:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0075_payment_paid_at_index"
down_revision: str | Sequence[str] | None = "0074_subscription_webhook_url"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Records made before block times were kept take the time they were recorded, as the
    # report already showed them; then every record has one and the report filters on it.
    op.execute("UPDATE payment_records SET block_time = created_at WHERE block_time IS NULL")
    with op.batch_alter_table("payment_records") as batch:
        batch.alter_column("block_time", existing_type=sa.BigInteger(), nullable=False)
    # The report's window and its order (reports.sources): a month is one range of it.
    op.create_index(
        "ix_payment_records_block_time",
        "payment_records",
        ["block_time", "invoice_id", "tx_hash", "source"],
    )


def downgrade() -> None:
    op.drop_index("ix_payment_records_block_time", table_name="payment_records")
    with op.batch_alter_table("payment_records") as batch:
        batch.alter_column("block_time", existing_type=sa.BigInteger(), nullable=True)
