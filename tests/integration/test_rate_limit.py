"""Rate limits kept in the database: the limiter itself, housekeeping, and each route family
over real HTTP (the payment page per client, the API per owner, API-key issuance per owner
and hour), with the client address read as the trusted-proxy setting says."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from eth_account import Account
from sqlalchemy import event, func, select

from invoicing import housekeeping
from invoicing.chain.deploy import DevDeployment
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.errors import RateLimited
from invoicing.ratelimit import _write_counts, flush_deferred, hit, hit_deferred
from invoicing.tables.auth import ApiKey
from invoicing.tables.invoices import Invoice
from invoicing.tables.ratelimit import RateLimitWindow
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers

pytestmark = pytest.mark.integration

MINUTE_MS = 60_000
UNKNOWN = "0x" + "ab" * 20
_minutes = itertools.count(1)


def own_minute() -> int:
    """1 s into a minute no other test uses (years ahead): requests of other tests from
    127.0.0.1 to the shared database count in their own windows."""
    base = int(time.time() * 1000) + 30 * 365 * 86_400_000
    return base - base % MINUTE_MS + next(_minutes) * 7 * MINUTE_MS + 1_000


async def rows_for(db: Database, key: str) -> list[tuple[int, int]]:
    async with db.sessions() as session:
        found = await session.execute(
            select(RateLimitWindow.window_start_ms, RateLimitWindow.count)
            .where(RateLimitWindow.key == key)
            .order_by(RateLimitWindow.window_start_ms)
        )
    return [(int(start), int(count)) for start, count in found]


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


async def test_concurrent_hits_are_each_counted_once_in_one_batch(database_url: str) -> None:
    db = Database(database_url)
    key = f"test-burst-{Account.create().address}"
    now = 1_900_000_000_000 - 1_900_000_000_000 % 60_000 + 5_000
    try:
        outcomes = await asyncio.gather(
            *(hit(db, [key], 30, now) for _ in range(50)), return_exceptions=True
        )
        stored = await rows_for(db, key)
    finally:
        await db.dispose()

    refused = [o for o in outcomes if isinstance(o, RateLimited)]
    assert (len(refused), outcomes.count(None)) == (20, 30)
    assert {o.retry_after_s for o in refused} == {55}
    assert stored == [(now - 5_000, 50)]


@pytest.mark.parametrize(("keys", "statements"), [(40, 1), (1_500, 2)])
async def test_a_flush_adds_up_to_a_thousand_keys_in_one_statement(
    database_url: str, keys: int, statements: int
) -> None:
    db = Database(database_url)
    prefix = f"test-flush-{Account.create().address}"
    start = 1_900_000_000_000 - 1_900_000_000_000 % 60_000
    rows = [
        {
            "key": f"{prefix}-{i:04}",
            "window_start_ms": start,
            "count": i + 1,
            "expires_at_ms": start + MINUTE_MS,
        }
        for i in range(keys)
    ]
    sent: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent.append(statement)

    for engine in db.sync_engines:
        event.listen(engine, "before_cursor_execute", count)
    try:
        first = await _write_counts(db, rows)
        again = await _write_counts(db, rows[:3])
        stored = await rows_for(db, f"{prefix}-0001")
    finally:
        await db.dispose()

    upserts = [s for s in sent if s.startswith("INSERT INTO rate_limit_windows")]
    assert len(upserts) == statements + 1
    assert first == {(f"{prefix}-{i:04}", start): i + 1 for i in range(keys)}
    assert again == {(f"{prefix}-{i:04}", start): 2 * (i + 1) for i in range(3)}
    assert stored == [(start, 4)]


async def test_deferred_counts_hold_across_processes(database_url: str) -> None:
    # Two Database objects on one database are two API processes.
    first, second = Database(database_url), Database(database_url)
    key = f"test-deferred-{Account.create().address}"
    now = 1_900_000_000_000 - 1_900_000_000_000 % 60_000 + 30_000
    try:
        for _ in range(3):
            await hit_deferred(first, [key], 4, now)  # decided at once, written soon after
        await flush_deferred(first)
        # The second process learns the total when it writes its own first hit.
        await hit_deferred(second, [key], 4, now)
        await flush_deferred(second)
        with pytest.raises(RateLimited) as raised:
            await hit_deferred(second, [key], 4, now)
        await flush_deferred(second)
        stored = await rows_for(first, key)
    finally:
        await first.dispose()
        await second.dispose()

    assert raised.value.retry_after_s == 30
    assert stored == [(now - 30_000, 5)]


async def test_a_limit_of_zero_counts_nothing(database_url: str) -> None:
    db = Database(database_url)
    key = f"test-off-{Account.create().address}"
    try:
        for _ in range(3):
            await hit(db, [key], 0, 1_900_000_000_000)
        stored = await rows_for(db, key)
    finally:
        await db.dispose()
    assert stored == []


async def test_requests_delete_nothing_housekeeping_purges_windows_that_are_over(
    make_services: MakeServices, own_database: str
) -> None:
    # A database of its own: housekeeping purges every window that is over, other tests' too.
    services = await make_services(database_url=own_database)
    start = own_minute()
    # 1 s into its hour: the two minutes below are over long before the hour is.
    clock = FakeClock(start - start % 3_600_000 + 1_000)
    services.clock = clock
    minute_key, hour_key = f"test-m-{new_owner().address}", f"test-h-{new_owner().address}"
    first = clock.now_ms()
    await hit(services.db, [minute_key], 10, first)
    await hit(services.db, [hour_key], 10, first, window_ms=3_600_000)
    await hit(services.db, [minute_key], 10, first + MINUTE_MS)  # the next minute

    assert len(await rows_for(services.db, minute_key)) == 2  # the hit deleted nothing

    clock.set(first - first % MINUTE_MS + 2 * MINUTE_MS)  # both minutes are over
    await housekeeping.run_once(services)

    assert await rows_for(services.db, minute_key) == []
    assert len(await rows_for(services.db, hour_key)) == 1  # its hour is not over
    assert housekeeping.run in housekeeping_workers()


def housekeeping_workers() -> list[Callable[..., Any]]:
    from invoicing.workers import all_workers

    return list(all_workers())


@asynccontextmanager
async def running(services: Any) -> AsyncIterator[RunningApp]:
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


def assert_rate_limited(response: httpx.Response, retry_after_s: int) -> None:
    assert response.status_code == 429
    assert response.headers["retry-after"] == str(retry_after_s)
    error = response.json()["error"]
    assert error["code"] == "rate_limited"
    assert error["details"] == {"retryAfterS": retry_after_s}
    assert isinstance(error["message"], str) and error["message"]


async def test_the_payment_page_is_limited_per_client_address(
    make_services: MakeServices, own_database: str
) -> None:
    # A database of its own: every request here comes from 127.0.0.1.
    services = await make_services(database_url=own_database, pay_rate_limit_per_minute=3)
    services.clock = FakeClock(own_minute())
    async with running(services) as app:
        paths = [f"/pay/{UNKNOWN}", f"/pay/{UNKNOWN}/status", f"/pay/{UNKNOWN}/qr.svg"]
        answers = [await app.http.get(path) for path in paths]
        # A client cannot choose its key: X-Forwarded-For from an untrusted peer is ignored.
        spoofed = await app.http.get(paths[1], headers={"x-forwarded-for": "198.51.100.9"})

    assert [a.status_code for a in answers] == [404, 404, 404]
    assert_rate_limited(spoofed, 59)
    await flush_deferred(services.db)
    assert await rows_for(services.db, "pay-ip:127.0.0.1") == [(services.clock.now_ms() - 1_000, 4)]


async def test_behind_a_trusted_proxy_the_right_most_untrusted_forwarded_address_counts(
    make_services: MakeServices, own_database: str
) -> None:
    services = await make_services(
        database_url=own_database,
        pay_rate_limit_per_minute=2,
        trusted_proxies="10.0.0.0/8, 127.0.0.1/32",
    )
    services.clock = FakeClock(own_minute())
    path = f"/pay/{UNKNOWN}/status"
    async with running(services) as app:

        async def get(forwarded: str) -> int:
            response = await app.http.get(path, headers={"x-forwarded-for": forwarded})
            return response.status_code

        # The client prepends whatever it likes; the proxies append what they saw.
        first = [await get(f"{fake}, 198.51.100.7, 10.1.2.3") for fake in ("1.1.1.1", "2.2.2.2")]
        third = await get("3.3.3.3, 198.51.100.7")
        other_client = await get("198.51.100.8")

    assert (first, third, other_client) == ([404, 404], 429, 404)
    await flush_deferred(services.db)
    assert [len(await rows_for(services.db, f"pay-ip:198.51.100.{i}")) for i in (7, 8)] == [1, 1]
    assert await rows_for(services.db, "pay-ip:127.0.0.1") == []


async def test_a_client_rotating_through_the_addresses_of_its_ipv6_64_is_counted_once(
    make_services: MakeServices, own_database: str
) -> None:
    services = await make_services(
        database_url=own_database, pay_rate_limit_per_minute=2, trusted_proxies="127.0.0.1/32"
    )
    services.clock = FakeClock(own_minute())
    path = f"/pay/{UNKNOWN}/status"
    async with running(services) as app:

        async def get(client: str) -> int:
            response = await app.http.get(path, headers={"x-forwarded-for": client})
            return response.status_code

        # One subscriber's /64 holds 2^64 addresses: each request comes from a fresh one.
        rotating = [await get(f"2001:db8:7:1::{n:x}") for n in range(1, 4)]
        next_prefix = await get("2001:db8:7:2::1")

    assert (rotating, next_prefix) == ([404, 404, 429], 404)
    await flush_deferred(services.db)
    assert [len(await rows_for(services.db, f"pay-ip:2001:db8:7:{n}::/64")) for n in (1, 2)] == [
        1,
        1,
    ]
    assert await rows_for(services.db, "pay-ip:2001:db8:7:1::1") == []


async def test_authenticated_routes_are_limited_per_owner_and_only_once_authenticated(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    services = await make_services(owner_rate_limit_per_minute=3)
    services.clock = FakeClock(own_minute())
    owner, other = new_owner(), new_owner()
    key, other_key = await issue_api_key(services, owner), await issue_api_key(services, other)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    async with running(services) as app:
        # Strangers cannot spend the owner's limit: unauthenticated requests do not count.
        strangers = [
            await app.http.post("/integration/invoices", json=body, headers=key_headers("bad"))
            for _ in range(4)
        ]
        created = [
            await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
            for _ in range(2)
        ]
        listed = await app.http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers=key_headers(key),
        )
        refused = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
        other_owner = await app.http.post(
            "/integration/invoices",
            json={**body, "ownerAddress": other.address},
            headers=key_headers(other_key),
        )

    assert [s.status_code for s in strangers] == [401] * 4
    assert [c.status_code for c in created] + [listed.status_code] == [201, 201, 200]
    assert_rate_limited(refused, 59)
    assert other_owner.status_code == 201
    async with services.db.sessions() as session:
        total = await session.scalar(
            select(func.count())
            .select_from(Invoice)
            .where(Invoice.owner_key == owner.address.lower())
        )
    assert total == 2


async def test_bad_credentials_are_limited_per_client_address(
    make_services: MakeServices, own_database: str, dev: DevDeployment
) -> None:
    """Guessing API keys (the API's routes and the x402 facilitator alike) counts against the
    client network's limit of the public routes; an owner with a good key is not held."""
    services = await make_services(database_url=own_database, pay_rate_limit_per_minute=3)
    services.clock = FakeClock(own_minute())
    owner = new_owner()
    key = await issue_api_key(services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    async with running(services) as app:
        guesses = [
            await app.http.post("/integration/invoices", json=body, headers=key_headers("bad"))
            for _ in range(3)
        ]
        facilitator = await app.http.post(
            "/x402/facilitator/verify", json={}, headers=key_headers("bad")
        )
        api = await app.http.post("/integration/invoices", json=body, headers=key_headers("bad"))
        good = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))

    assert [g.status_code for g in guesses] == [401] * 3
    assert_rate_limited(facilitator, 59)
    assert_rate_limited(api, 59)
    assert good.status_code == 201
    await flush_deferred(services.db)
    assert await rows_for(services.db, "bad-credential-ip:127.0.0.1") == [
        (services.clock.now_ms() - 1_000, 5)
    ]


async def test_replays_of_a_signed_create_spend_none_of_the_owners_limit(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    """A signed create's replay key is recorded in the create's transaction, after the
    request was counted: a replay, refused there, takes its hits back."""
    services = await make_services(owner_rate_limit_per_minute=3)
    now = own_minute()
    services.clock = FakeClock(now)
    owner = new_owner()

    def signed(n: int) -> tuple[dict[str, Any], dict[str, str]]:
        body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": str(n)}
        payload = {k: v for k, v in body.items() if k != "ownerAddress"}
        return body, signed_headers(owner, "invoice.create", payload, timestamp_ms=now - n)

    async with running(services) as app:
        first = await app.http.post(
            "/integration/invoices", json=signed(1)[0], headers=signed(1)[1]
        )
        replays = [
            await app.http.post("/integration/invoices", json=signed(1)[0], headers=signed(1)[1])
            for _ in range(5)
        ]
        more = [
            await app.http.post("/integration/invoices", json=signed(n)[0], headers=signed(n)[1])
            for n in (2, 3, 4)
        ]
        await flush_deferred(services.db)

    assert first.status_code == 201
    assert [r.json()["error"]["code"] for r in replays] == ["replayed_request"] * 5
    assert [r.status_code for r in more[:2]] == [201, 201]
    assert_rate_limited(more[2], 59)
    window = now - now % MINUTE_MS
    assert await rows_for(services.db, f"api-owner:{owner.address.lower()}") == [(window, 4)]


async def test_api_key_issuance_is_limited_per_owner_and_hour(
    make_services: MakeServices,
) -> None:
    services = await make_services(api_key_issuance_per_hour=2)
    # Signature mode checks the timestamp against the service's clock: keep it real here,
    # in an hour of its own for this owner (keys are per owner).
    owner = new_owner()
    body = {"ownerAddress": owner.address, "label": "shop"}
    payload = {"label": "shop"}
    async with running(services) as app:
        answers = [
            await app.http.post(
                "/integration/api-keys",
                json=body,
                headers=signed_headers(owner, "apikey.create", payload),
            )
            for _ in range(3)
        ]

    assert [a.status_code for a in answers[:2]] == [201, 201]
    assert answers[2].status_code == 429
    error = answers[2].json()["error"]
    assert error["code"] == "rate_limited" and "per hour" in error["message"]
    retry_after = int(answers[2].headers["retry-after"])
    assert 1 <= retry_after <= 3600 and error["details"] == {"retryAfterS": retry_after}
    async with services.db.sessions() as session:
        keys = await session.scalar(
            select(func.count())
            .select_from(ApiKey)
            .where(ApiKey.owner_key == owner.address.lower())
        )
    assert keys == 2
