"""subscriptions keep a webhookUrl and their creation credential for their charges' invoices

Revision ID: 0074_subscription_webhook_url
Revises: 0073_refund_claims
Create Date: 2026-11-28 13:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0074_subscription_webhook_url"
down_revision: str | Sequence[str] | None = "0073_refund_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("webhook_url", sa.Text()),
    ("auth_mode", sa.String(16)),
    ("api_key_id", sa.String(36)),
    ("auth_signature", sa.String(200)),
    ("auth_timestamp", sa.String(20)),
)


def upgrade() -> None:
    # Null on subscriptions made before: their charges send no paid webhook, as before.
    with op.batch_alter_table("subscriptions") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
