"""Fixed-window request counters in the database, so a limit holds across API processes."""

from __future__ import annotations

from sqlalchemy import delete

from invoicing.db import Database, upsert
from invoicing.errors import RateLimited
from invoicing.fees.models import RateLimitWindow

WINDOW_MS = 60_000


async def hit(db: Database, keys: list[str], limit: int, now_ms: int) -> None:
    """Count one request against each key; 429 when any key is over ``limit`` per minute."""
    window = now_ms - now_ms % WINDOW_MS
    worst = 0
    async with db.transaction() as session:
        await session.execute(
            delete(RateLimitWindow).where(RateLimitWindow.window_start_ms < window)
        )
        for key in keys:
            statement = upsert(db.dialect, RateLimitWindow).values(
                key=key, window_start_ms=window, count=1
            )
            count = await session.scalar(
                statement.on_conflict_do_update(
                    index_elements=["key", "window_start_ms"],
                    set_={"count": RateLimitWindow.count + 1},
                ).returning(RateLimitWindow.count)
            )
            worst = max(worst, int(count or 0))
    if worst > limit:
        retry_after_s = max(1, -(-(window + WINDOW_MS - now_ms) // 1000))
        raise RateLimited(f"too many requests; at most {limit} per minute", retry_after_s)
