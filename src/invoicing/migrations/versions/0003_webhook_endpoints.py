"""webhook endpoint health: failing endpoints, and each event's endpoint key and host

Revision ID: 0003_webhook_endpoints
Revises: 0002_settlement
Create Date: 2026-11-23 04:30:00.000000
"""

import hashlib
from collections.abc import Sequence
from urllib.parse import urlsplit

import sqlalchemy as sa
from alembic import op

revision: str = "0003_webhook_endpoints"
down_revision: str | Sequence[str] | None = "0002_settlement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("last_failure_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_webhook_endpoints")),
    )
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("endpoint_key", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("endpoint_host", sa.String(length=300), nullable=True))
    _fill_endpoints()
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.alter_column("endpoint_key", existing_type=sa.String(length=64), nullable=False)
        batch_op.alter_column("endpoint_host", existing_type=sa.String(length=300), nullable=False)


def _fill_endpoints() -> None:
    """Key and host of the events already queued (as ``notifications.endpoints`` computes them)."""
    events = sa.table(
        "webhook_events",
        sa.column("id", sa.String),
        sa.column("url", sa.String),
        sa.column("endpoint_key", sa.String),
        sa.column("endpoint_host", sa.String),
    )
    connection = op.get_bind()
    rows = connection.execute(sa.select(events.c.id, events.c.url)).all()
    changes = [{"b_id": id_, "b_key": _key(url), "b_host": _host(url)} for id_, url in rows]
    if changes:
        connection.execute(
            events.update()
            .where(events.c.id == sa.bindparam("b_id"))
            .values(endpoint_key=sa.bindparam("b_key"), endpoint_host=sa.bindparam("b_host")),
            changes,
        )


def _key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def _host(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    default_port = 443 if parts.scheme == "https" else 80
    return f"{parts.hostname or ''}:{port or default_port}"[:300]


def downgrade() -> None:
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.drop_column("endpoint_host")
        batch_op.drop_column("endpoint_key")
    op.drop_table("webhook_endpoints")
