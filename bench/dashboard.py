"""Dashboard: server time of the invoice list page and of the CSV export for one owner with
100,000 invoices on PostgreSQL, against the API's list call measured in the same run.

Seeds the invoices in bulk (``bench/monitor.py``'s seed: one ``INSERT ... SELECT
generate_series``), spreads their creation times over 100 days and their statuses, then calls
the app in process (httpx's ASGI transport: no socket, so the figures are the server's time)
with a dashboard session and an API key of that owner. Prints one line per case::

    dashboard list_page invoices=100000 median_ms=… api_list_median_ms=… ratio=…
    dashboard list_page_deep …   (the page after row 50,000: keyset, so no slower)
    dashboard csv_export rows=100000 seconds=… rows_per_s=… api_rows_per_s=… ratio=…

``ratio`` is the dashboard's time over the API's for the list (below 1: faster), and the
export's rows per second over the API list's rows per second (the API pages 100 at a time).
Exits 1 when a goal is missed: the list page under 100 ms, the export at least 20,000 rows/s.

    .venv/bin/python bench/dashboard.py [--database-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--invoices 100000] [--repeat 25]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from invoicing.addresses import checksum_encode
from invoicing.auth.api_keys import create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.auth.sign_in import NewSession, open_session
from invoicing.invoices.browse import encode_cursor
from invoicing.migrate import upgrade
from invoicing.services import build_services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app

sys.path.insert(0, str(Path(__file__).parent))
from monitor import fresh_database, seed_postgres  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

LIST_GOAL_MS = 100.0
EXPORT_GOAL_ROWS_PER_S = 20_000
CHAIN_ID = 31337
SPREAD = text(
    """
    UPDATE invoices SET
        created_at = :now_ms - (('x' || substr(md5(id), 1, 8))::bit(32)::bigint % 8640000000),
        status = (ARRAY['pending','paid','completed','expired','cancelled'])[
            1 + ('x' || substr(md5(id), 9, 2))::bit(8)::int % 5],
        description = 'order ' || invoice_id
    """
)


def seed(url: str, n: int, now_ms: int) -> str:
    token = checksum_encode(os.urandom(20))
    seed_postgres(url, n, CHAIN_ID, token, now_ms, token_every=5)
    engine = create_engine(make_url(url).set(drivername="postgresql+psycopg2"))
    with engine.begin() as connection:
        connection.execute(SPREAD, {"now_ms": now_ms})
        owner = connection.execute(text("SELECT owner_address FROM invoices LIMIT 1")).scalar()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE invoices"))
    engine.dispose()
    assert isinstance(owner, str)
    return owner


async def timed(client: httpx.AsyncClient, url: str, repeat: int, **kwargs: object) -> float:
    """Median milliseconds of ``repeat`` GETs (after one warm-up)."""
    (await client.get(url, **kwargs)).raise_for_status()  # type: ignore[arg-type]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        answer = await client.get(url, **kwargs)  # type: ignore[arg-type]
        times.append((time.perf_counter() - start) * 1000)
        answer.raise_for_status()
    return statistics.median(times)


async def measure(server: str, n: int, repeat: int) -> bool:
    url, drop = fresh_database(server)
    try:
        await upgrade(url)
        now_ms = int(time.time() * 1000)
        owner = seed(url, n, now_ms)
        settings = Settings(
            environment="development",
            database_url=url,
            run_workers=False,
            owner_rate_limit_per_minute=0,
        )
        services = build_services(settings)
        async with services.db.transaction() as session:
            _row, token = await open_session(
                session, NewSession(owner, "link", None, "bench"), now_ms, 3_600_000
            )
            _key, api_key = await create_api_key(
                session, owner, "bench", ServerSecrets.of(settings), now_ms
            )
        async with services.db.sessions() as session:
            middle = await session.scalar(
                select(Invoice)
                .where(Invoice.owner_key == owner.lower())
                .order_by(Invoice.created_at.desc(), Invoice.id.desc())
                .offset(n // 2)
                .limit(1)
            )
        assert middle is not None
        transport = httpx.ASGITransport(app=create_app(services, run_workers_in_process=False))
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://127.0.0.1:8000",
            cookies={"invoicing_session": token},
            timeout=120,
        ) as client:
            api = {"x-service-api-key": api_key.get_secret_value()}
            api_params = {"ownerAddress": owner, "limit": "100"}
            api_ms = await timed(
                client, "/integration/invoices", repeat, params=api_params, headers=api
            )
            list_ms = await timed(client, "/dashboard/invoices", repeat)
            deep_ms = await timed(
                client, "/dashboard/invoices", repeat, params={"after": encode_cursor(middle)}
            )
            start = time.perf_counter()
            rows = 0
            async with client.stream("GET", "/dashboard/invoices.csv") as answer:
                answer.raise_for_status()
                async for chunk in answer.aiter_raw():
                    rows += chunk.count(b"\n")
            export_s = time.perf_counter() - start
        await services.aclose()
        rows -= 1  # the header
        rows_per_s = rows / export_s
        api_rows_per_s = 100 / (api_ms / 1000)
        print(  # noqa: T201 - the benchmark's output
            f"dashboard list_page invoices={n} median_ms={list_ms:.1f} "
            f"api_list_median_ms={api_ms:.1f} ratio={list_ms / api_ms:.2f}"
        )
        print(  # noqa: T201
            f"dashboard list_page_deep invoices={n} after_row={n // 2} median_ms={deep_ms:.1f} "
            f"api_list_median_ms={api_ms:.1f} ratio={deep_ms / api_ms:.2f}"
        )
        print(  # noqa: T201
            f"dashboard csv_export rows={rows} seconds={export_s:.2f} rows_per_s={rows_per_s:.0f} "
            f"api_rows_per_s={api_rows_per_s:.0f} ratio={rows_per_s / api_rows_per_s:.2f}"
        )
        assert rows == n, rows
        return max(list_ms, deep_ms) < LIST_GOAL_MS and rows_per_s >= EXPORT_GOAL_ROWS_PER_S
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--invoices", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.invoices, args.repeat = 200, 2
    ok = asyncio.run(measure(args.database_url, args.invoices, args.repeat))
    sys.exit(0 if ok or args.smoke else 1)


if __name__ == "__main__":
    main()
