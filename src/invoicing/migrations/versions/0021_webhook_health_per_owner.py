"""webhook health per owner and URL: queued deliveries' health keys take their owner

Revision ID: 0021_webhook_health_per_owner
Revises: 0020_api_key_last_used
Create Date: 2026-11-25 19:30:00.000000
"""

import hashlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_webhook_health_per_owner"
down_revision: str | Sequence[str] | None = "0020_api_key_last_used"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHUNK = 5000

EVENTS = sa.table(
    "webhook_events",
    sa.column("id", sa.String),
    sa.column("owner_key", sa.String),
    sa.column("url", sa.String),
    sa.column("status", sa.String),
    sa.column("endpoint_key", sa.String),
)
HEALTH = sa.table("webhook_endpoints", sa.column("key", sa.String))


def _per_owner(owner_key: str, url: str) -> str:
    """``notifications.endpoints.endpoint_key`` as of this revision."""
    return hashlib.sha256(f"{owner_key.lower()} {url}".encode()).hexdigest()


def _per_url(_owner_key: str, url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def _rekey(key: Callable[[str, str], str]) -> None:
    """Give every pending delivery its health key, and forget the streaks kept under the
    other keys (a streak starts again at the next failure)."""
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(EVENTS.c.id, EVENTS.c.owner_key, EVENTS.c.url).where(EVENTS.c.status == "pending")
    ).all()
    update = (
        EVENTS.update()
        .where(EVENTS.c.id == sa.bindparam("b_id"))
        .values(endpoint_key=sa.bindparam("b_key"))
    )
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        connection.execute(update, [{"b_id": i, "b_key": key(o, u)} for i, o, u in chunk])
    connection.execute(HEALTH.delete())


def upgrade() -> None:
    _rekey(_per_owner)


def downgrade() -> None:
    _rekey(_per_url)
