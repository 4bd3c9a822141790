"""Events in the monitor's hot path: what writing them costs when many invoices move at once.

Inserts N pending invoices of one owner into a fresh database, then times the monitor's
store step (``monitor.check.store_balances``: lock the rows, decide, write, and now the
events in the same transaction) for three kinds of reading, each on its own N invoices:

- ``record_only``: a reading of deleted (cancelled) invoices, which records the balance and
  writes no event: the store step as it was before events, the baseline of the same run;
- ``paid``: every invoice becomes paid with a webhookUrl (one ``invoice.paid`` event and
  the paid webhook each), the owner without endpoints;
- ``paid_2_endpoints``: the same with two endpoints taking every event (two deliveries more).

Prints one line::

    events store n=1000 record_only_ms=… paid_ms=… paid_2_endpoints_ms=… paid_ratio=… …

    .venv/bin/python bench/events.py [--n 1000] [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from invoicing.addresses import checksum_encode
from invoicing.chain.chains import ChainRegistry
from invoicing.db import Database
from invoicing.migrate import upgrade
from invoicing.monitor.check import store_balances
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventEndpoint

sys.path.insert(0, str(Path(__file__).parent))
from monitor import invoice_row  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

CHAIN_ID = 31337
# The monitor stores readings in chunks of this many invoices (``monitor.passes._store``).
CHUNK = 500


def invoice_rows(n: int, owner: str, now_ms: int, deleted: bool) -> list[dict[str, Any]]:
    """Native invoices (``bench/monitor.invoice_row``) with a webhookUrl, cancelled ones
    when ``deleted``."""
    changes: dict[str, Any] = {"webhook_url": "https://hooks.example/paid"}
    if deleted:
        changes |= {"status": "cancelled", "deleted_at": now_ms, "watch": False}
    return [
        invoice_row(i + 1, owner, CHAIN_ID, "", now_ms, token_every=0) | changes for i in range(n)
    ]


async def timed_store(services: Services, rows: list[dict[str, Any]]) -> float:
    """Store a full payment for every row (in the monitor's chunks); seconds."""
    balances: dict[str, int | None] = {row["id"]: 10**18 for row in rows}
    ids = list(balances)
    started = time.perf_counter()
    for start in range(0, len(ids), CHUNK):
        await store_balances(services, ids[start : start + CHUNK], balances, 1)
    return time.perf_counter() - started


async def case(services: Services, n: int, *, deleted: bool = False, endpoints: int = 0) -> float:
    owner = checksum_encode(os.urandom(20))
    now_ms = services.clock.now_ms()
    rows = invoice_rows(n, owner, now_ms, deleted)
    async with services.db.transaction() as session:
        await session.execute(insert(Invoice), rows)
        for _ in range(endpoints):
            session.add(
                EventEndpoint(
                    id=str(uuid.uuid4()),
                    owner_key=owner.lower(),
                    url="https://hooks.example/events",
                    events=["*"],
                    enabled=True,
                    created_at=now_ms,
                    updated_at=now_ms,
                )
            )
    return await timed_store(services, rows)


async def main(n: int, postgres: str | None) -> None:
    url, drop = fresh_database(postgres)
    try:
        await upgrade(url)
        settings = Settings(environment="development", database_url=url, run_workers=False)
        services = Services(settings=settings, db=Database(url), chains=ChainRegistry({}))
        await case(services, 100)  # warm-up: connections, statement caches
        record_only = await case(services, n, deleted=True)
        paid = await case(services, n)
        fan_out = await case(services, n, endpoints=2)
        await services.db.dispose()
    finally:
        drop()
    database = "postgresql" if postgres else "sqlite"
    print(
        f"events store db={database} n={n} record_only_ms={record_only * 1000:.0f} "
        f"paid_ms={paid * 1000:.0f} paid_2_endpoints_ms={fan_out * 1000:.0f} "
        f"paid_ratio={paid / record_only:.2f} paid_2_endpoints_ratio={fan_out / record_only:.2f} "
        f"per_paid_invoice_us={paid / n * 1e6:.0f}"
    )


def fresh_database(postgres: str | None) -> tuple[str, Any]:
    if postgres is None:
        path = os.path.join(tempfile.mkdtemp(prefix="bench-events-"), "bench.db")
        return f"sqlite+aiosqlite:///{path}", lambda: None
    name = f"bench_events_{uuid.uuid4().hex[:8]}"
    admin = create_engine(
        make_url(postgres).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    url = make_url(postgres).set(database=name, drivername="postgresql+asyncpg")
    return url.render_as_string(False), drop


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.n = 20
    asyncio.run(main(args.n, args.postgres))
