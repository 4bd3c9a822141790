"""Monitor: one pass over N watched invoices, against one eth_getBalance per invoice.

Starts its own anvil, deploys the dev contracts, inserts N pending invoices (80% native,
20% TUSD; a few of them funded) into a fresh database, then times one due pass of the
monitor (claim, batched ``balancesOf`` reads pinned to one block, stored results) and, in the
same run, the naive alternative: one ``eth_getBalance`` per invoice (64 in flight; a token
invoice gets one ``balanceOf`` eth_call instead). Prints::

    monitor n=100000 pass_s=2.91 rpc_calls=19 paid=10 baseline_s=380.1 baseline_calls=100000 ...

Above ``--baseline-max`` invoices the baseline is timed on that many and scaled linearly
(the line then says ``baseline_measured=<count>``). Exits 1 when the pass over 100k misses
the goal (at most 20 RPC calls and 5 s).

    .venv/bin/python bench/monitor.py [--sizes 1000,10000,100000] [--baseline-max 20000]
        [--postgres postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from invoicing.addresses import checksum_encode
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.invoices.models import Invoice
from invoicing.migrate import upgrade
from invoicing.monitor.passes import run_due_pass
from invoicing.services import build_services
from invoicing.settings import ChainConfig, Settings

PAYER_KEY = DEV_PRIVATE_KEYS[4]
FUNDED = 10
GOAL_N = 100_000
GOAL_CALLS = 20
GOAL_S = 5.0
BASELINE_IN_FLIGHT = 64


def invoice_rows(n: int, chain_id: int, token: str, now_ms: int) -> list[dict[str, Any]]:
    owner = checksum_encode(os.urandom(20))
    rows = []
    for i in range(n):
        is_token = i % 5 == 4
        rows.append(
            {
                "id": str(uuid.uuid4()),
                "owner_address": owner,
                "owner_key": owner.lower(),
                "chain_id": chain_id,
                "invoice_id": str(i + 1),
                "payment_address": checksum_encode(os.urandom(20)),
                "salt": "0x" + os.urandom(32).hex(),
                "amount": "1",
                "token_address": token if is_token else None,
                "decimals": 6 if is_token else 18,
                "required_raw": str(10**6 if is_token else 10**18),
                "expires_at": now_ms + 86_400_000,
                "status": "pending",
                "paid": False,
                "withdrawn": False,
                "balance_raw": "0",
                "last_checked_at": now_ms,
                "created_at": now_ms,
                "updated_at": now_ms,
                "auth_mode": "api_key",
                "request_hash": "0" * 64,
                "watch": True,
                "next_check_at": now_ms,
                "swept_raw": "0",
            }
        )
    return rows


async def fund(evm: EvmClient, rows: list[dict[str, Any]]) -> None:
    for row in rows[:FUNDED]:
        if row["token_address"] is None:
            await evm.transact(PAYER_KEY, row["payment_address"], value=10**18)
        else:
            data = encode_call(TEST_TOKEN, "transfer", row["payment_address"], 10**6)
            await evm.transact(PAYER_KEY, row["token_address"], data)


async def baseline(evm: EvmClient, rows: list[dict[str, Any]], block: int) -> tuple[float, int]:
    """One eth_getBalance (native) or balanceOf eth_call (token) per invoice."""
    gate = asyncio.Semaphore(BASELINE_IN_FLIGHT)
    calls_before = evm.rpc.calls

    async def one(row: dict[str, Any]) -> None:
        async with gate:
            if row["token_address"] is None:
                await evm.get_balance(row["payment_address"], block)
            else:
                await evm.eth_call(
                    row["token_address"],
                    encode_call(ERC20, "balanceOf", row["payment_address"]),
                    block,
                )

    started = time.perf_counter()
    await asyncio.gather(*(one(row) for row in rows))
    return time.perf_counter() - started, evm.rpc.calls - calls_before


def fresh_database(postgres: str | None) -> tuple[str, Callable[[], None]]:
    """A new SQLite file, or a new database on the PostgreSQL server at ``postgres``."""
    if postgres is None:
        path = f"{tempfile.mkdtemp(prefix='bench-monitor-')}/b.db"
        return f"sqlite+aiosqlite:///{path}", lambda: None
    admin = create_engine(
        make_url(postgres).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    name = f"bench_monitor_{uuid.uuid4().hex[:10]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    url = make_url(postgres).set(drivername="postgresql+asyncpg", database=name)
    return url.render_as_string(hide_password=False), drop


async def measure(
    n: int, anvil: AnvilProcess, dev: DevDeployment, baseline_max: int, postgres: str | None
) -> bool:
    url, drop = fresh_database(postgres)
    try:
        return await _measure(n, anvil, dev, baseline_max, url)
    finally:
        drop()


async def _measure(
    n: int, anvil: AnvilProcess, dev: DevDeployment, baseline_max: int, url: str
) -> bool:
    await upgrade(url)
    chain = ChainConfig(chain_id=dev.chain_id, name="anvil", rpc_url=anvil.url, factory=dev.factory)
    services = build_services(
        Settings(environment="development", database_url=url, chains=[chain], run_workers=False)
    )
    gateway = services.chains.all()[0]
    assert isinstance(gateway, EvmGateway)
    rows = invoice_rows(n, dev.chain_id, dev.token, services.clock.now_ms())
    async with services.db.transaction() as session:
        for start in range(0, n, 5000):
            await session.execute(insert(Invoice), rows[start : start + 5000])
    await fund(gateway.evm, rows)

    calls_before = gateway.evm.rpc.calls
    started = time.perf_counter()
    result = await run_due_pass(services, gateway)
    pass_s = time.perf_counter() - started
    pass_calls = gateway.evm.rpc.calls - calls_before
    sample = rows[:baseline_max]
    base_s, base_calls = await baseline(gateway.evm, sample, result.block)
    await services.aclose()
    measured = ""
    if len(sample) < n:
        measured = f" baseline_measured={len(sample)}"
        base_s, base_calls = base_s * n / len(sample), n

    print(
        f"monitor db={url.split(':')[0].split('+')[0]} n={n} pass_s={pass_s:.2f} "
        f"rpc_calls={pass_calls} checked={result.checked} "
        f"paid={result.paid} baseline_s={base_s:.2f} baseline_calls={base_calls} "
        f"speedup={base_s / pass_s:.1f}x calls_ratio={pass_calls / base_calls:.5f}{measured}",
        flush=True,
    )
    if result.checked < n or result.paid != FUNDED:
        print(f"monitor n={n} FAILED: checked {result.checked}, paid {result.paid}")
        return False
    return n != GOAL_N or (pass_calls <= GOAL_CALLS and pass_s <= GOAL_S)


async def run(sizes: list[int], baseline_max: int, postgres: str | None) -> bool:
    ok = True
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        await evm.aclose()
        for n in sizes:
            ok = await measure(n, anvil, dev, baseline_max, postgres) and ok
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--baseline-max", type=int, default=20_000)
    parser.add_argument(
        "--postgres", default=None, help="server URL; default: a fresh SQLite file per size"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.exit(0 if asyncio.run(run(sizes, args.baseline_max, args.postgres)) else 1)


if __name__ == "__main__":
    main()
