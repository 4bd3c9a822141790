"""The fixed-window rate limit, counted in the real test database."""

from __future__ import annotations

import pytest
from eth_account import Account

from invoicing.db import Database
from invoicing.errors import RateLimited
from invoicing.fees.ratelimit import hit


async def test_rate_limit_counts_per_key_and_window(database_url: str) -> None:
    db = Database(database_url)
    key = f"ip:test-{Account.create().address}"
    start = 1_900_000_000_000 - 1_900_000_000_000 % 60_000
    try:
        for _ in range(2):
            await hit(db, [key], 2, start + 1_000)
        with pytest.raises(RateLimited) as raised:
            await hit(db, [key], 2, start + 20_500)
        await hit(db, [key + "-other"], 2, start + 20_500)
        await hit(db, [key], 2, start + 60_000)  # a new minute
    finally:
        await db.dispose()
    assert raised.value.retry_after_s == 40
