"""The chaos suite's topology, built once for the package (on one xdist worker).

It runs only on PostgreSQL (``make test DB=postgres``): the claim that API and worker
processes scale out and survive faults is a PostgreSQL one (SQLite is one file on one host).
On SQLite every chaos test is skipped with that reason.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.db import Database
from tests.chaos.topology import (
    Topology,
    proxied_database_url,
    run_invoicing,
    service_env,
    start_api,
    start_worker,
    wait_healthy,
    write_chains_file,
)
from tests.conftest import TEST_DATABASE, new_database_url
from tests.support.receiver import receiver
from tests.support.tcp_proxy import tcp_proxy

ON_POSTGRES = TEST_DATABASE.startswith("postgres")
SKIP_REASON = (
    "the chaos suite runs on PostgreSQL only (API and worker processes scale out on one "
    "PostgreSQL database); run it with `make test DB=postgres`"
)
SUMMARY = "chaos summary"  # each scenario records its line under this title (tests/conftest.py)
# Every chaos test module starts with this.
CHAOS = [
    pytest.mark.chaos,
    pytest.mark.slow,
    pytest.mark.skipif(not ON_POSTGRES, reason=SKIP_REASON),
]


@pytest.fixture(scope="package")
async def topology() -> AsyncIterator[Topology]:
    db_url, drop = new_database_url()
    target = make_url(db_url)
    with (
        tempfile.TemporaryDirectory(prefix="invoicing-chaos-") as tmp,
        AnvilProcess(block_time_s=1) as anvil,
        tcp_proxy("127.0.0.1", anvil.port) as chain_proxy,
        tcp_proxy(target.host or "127.0.0.1", target.port or 5432) as db_proxy,
    ):
        log_dir = Path(tmp)
        evm = EvmClient.connect(anvil.url)
        db = Database(db_url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        chains = write_chains_file(
            log_dir / "chains.toml", dev, f"http://127.0.0.1:{chain_proxy.port}"
        )
        env = service_env(proxied_database_url(db_url, db_proxy), chains)
        await run_invoicing(env, "migrate")
        apis = [start_api(env, log_dir, f"api-{i}") for i in (1, 2)]
        workers = [start_worker(env, log_dir, f"worker-{i}") for i in (1, 2)]
        async with receiver(keep_alive_s=120) as hooks:
            world = Topology(
                anvil, dev, evm, chain_proxy, db_proxy, db, env, apis, workers, hooks, log_dir
            )
            try:
                await asyncio.gather(*(wait_healthy(api) for api in apis))
                yield world
            finally:
                for process in world.processes:
                    process.stop()
                for api in apis:
                    await api.http.aclose()
                await evm.aclose()
                await db.dispose()
    drop()
