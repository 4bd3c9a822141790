"""events, event_endpoints, and the outbox columns that tie deliveries to them

``webhook_events`` rows become deliveries of an event: ``event_id`` (the event),
``endpoint_id`` (an owner's endpoint; null for the invoice's webhookUrl) and ``retry_until``
(an endpoint delivery's backoff ends there); ``invoice_pk`` may be null (a test ping).

Revision ID: 0013_events
Revises: 0012_webhook_signing
Create Date: 2026-11-23 20:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_events"
down_revision: str | Sequence[str] | None = "0012_webhook_signing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("invoice_pk", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_events")),
        sa.UniqueConstraint("id", name=op.f("uq_events_id")),
    )
    op.create_index("ix_events_owner_seq", "events", ["owner_key", "seq"])
    op.create_index("ix_events_owner_type_seq", "events", ["owner_key", "type", "seq"])
    op.create_index("ix_events_created_at", "events", ["created_at"])
    op.create_table(
        "event_endpoints",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("owner_key", sa.String(length=42), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("description", sa.String(length=1000), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.String(length=200), nullable=True),
        sa.Column("disabled_at", sa.BigInteger(), nullable=True),
        sa.Column("failing_since", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_endpoints")),
    )
    op.create_index("ix_event_endpoints_owner_key", "event_endpoints", ["owner_key", "created_at"])
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("event_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("endpoint_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("retry_until", sa.BigInteger(), nullable=True))
        batch_op.alter_column("invoice_pk", existing_type=sa.String(length=36), nullable=True)
        batch_op.create_index(batch_op.f("ix_webhook_events_event_id"), ["event_id"])
        batch_op.create_index(batch_op.f("ix_webhook_events_endpoint_id"), ["endpoint_id"])


def downgrade() -> None:
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_events_endpoint_id"))
        batch_op.drop_index(batch_op.f("ix_webhook_events_event_id"))
        batch_op.alter_column("invoice_pk", existing_type=sa.String(length=36), nullable=False)
        batch_op.drop_column("retry_until")
        batch_op.drop_column("endpoint_id")
        batch_op.drop_column("event_id")
    op.drop_index("ix_event_endpoints_owner_key", table_name="event_endpoints")
    op.drop_table("event_endpoints")
    op.drop_index("ix_events_created_at", table_name="events")
    op.drop_index("ix_events_owner_type_seq", table_name="events")
    op.drop_index("ix_events_owner_seq", table_name="events")
    op.drop_table("events")
