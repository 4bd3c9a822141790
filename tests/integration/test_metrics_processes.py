"""Scraping several processes as docs/operations/metrics.md says: two `invoicing serve` and one
`invoicing worker --metrics-port` on one database. Each process counts what it did itself;
the gauges read from the database answer the same in all three."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import pytest

from invoicing.auth.api_keys import create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.db import Database
from invoicing.settings import Settings
from tests.support.api import key_headers
from tests.support.monitor_anvil import pay_native
from tests.support.processes import TIMEOUT_S, running
from tests.support.receiver import receiver
from tests.support.scrape import Samples, scrape, value
from tests.support.signing import new_owner

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "scrape-token-" + "s" * 24


async def scrape_all(bases: list[str]) -> list[Samples]:
    auth = {"authorization": f"Bearer {TOKEN}"}
    samples = []
    for base in bases:
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S) as http:
            samples.append(await scrape(http, auth))
    return samples


async def test_each_process_counts_its_own_work_and_reads_shared_gauges_alike(
    own_database: str, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient, tmp_path: Path
) -> None:
    chains = tmp_path / "chains.toml"
    chains.write_text(  # no relayer key: this worker monitors and delivers, it sweeps nothing
        f'[[chain]]\nchain_id = {dev.chain_id}\nrpc_url = "{anvil.url}"\n'
        f'factory = "{dev.factory}"\nconfirmations = 1\n'
    )
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": own_database,
        "INVOICING_CHAINS_FILE": str(chains),
        "INVOICING_ENVIRONMENT": "development",
        "INVOICING_METRICS_TOKEN": TOKEN,
        "INVOICING_WEBHOOK_ALLOW_PRIVATE": "true",
        "INVOICING_MONITOR_POLL_INTERVAL_S": "0.1",
        "INVOICING_LOG_FORMAT": "json",
    }
    settings = Settings(environment="development", database_url=own_database)
    db = Database(own_database)
    owner = new_owner()
    chain = {"chain_id": dev.chain_id}
    async with (
        receiver() as hooks,
        running(
            [["serve", "--port"], ["serve", "--port"], ["worker", "--metrics-port"]], env, tmp_path
        ) as (api1, api2, worker),
    ):
        async with db.transaction() as session:
            _row, key = await create_api_key(
                session, owner.address, "ops", ServerSecrets.of(settings), int(time.time() * 1000)
            )
        created = []
        for base, amount in ((api1, "0.0001"), (api1, "0.0002"), (api2, "0.0003")):
            async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S) as http:
                response = await http.post(
                    "/integration/invoices",
                    json={
                        "ownerAddress": owner.address,
                        "chainId": dev.chain_id,
                        "amount": amount,
                        "webhookUrl": hooks.url("/paid"),
                    },
                    headers=key_headers(key.get_secret_value()),
                )
            assert response.status_code == 201, response.text
            created.append(response.json())
        waiting = await scrape_all([api1, api2, worker])

        await pay_native(evm, created[0]["paymentAddress"], 10**14)
        await hooks.wait_for("/paid", timeout_s=30)
        deadline = time.monotonic() + 30
        while True:  # the worker records the attempt just after the receiver answered
            done = await scrape_all([api1, api2, worker])
            if value(done[2], "invoicing_webhook_attempts_total", outcome="success") == 1:
                break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        done = await scrape_all([api1, api2, worker])
    await db.dispose()
    output = [(tmp_path / f"process-{i}.log").read_text() for i in range(3)]

    created_counts = [value(s, "invoicing_invoices_created_total", **chain) for s in waiting]
    assert created_counts == [2, 1, 0]
    # Gauges from the database: the same in every process.
    assert [value(s, "invoicing_monitor_watched", **chain) for s in waiting] == [3, 3, 3]
    assert [value(s, "invoicing_monitor_watched", **chain) for s in done] == [2, 2, 2]
    assert [value(s, "invoicing_webhook_pending") for s in done] == [0, 0, 0]
    # The worker found the payment and delivered its webhook; the API processes did neither.
    paid = [value(s, "invoicing_invoice_transitions_total", **chain, to="paid") for s in done]
    detected = [value(s, "invoicing_payment_detection_seconds_count") for s in done]
    assert paid == [0, 0, 1] and detected == [0, 0, 1]
    passes = value(done[2], "invoicing_monitor_pass_seconds_count", **chain, kind="block")
    assert passes >= 1
    # Every process logs JSON lines (INVOICING_LOG_FORMAT=json), uvicorn's included.
    lines = [json.loads(line) for text in output for line in text.splitlines()]
    assert all({"time", "level", "logger", "event"} <= set(line) for line in lines)
    started = [line for line in lines if str(line["event"]).startswith("Uvicorn running on")]
    assert len(started) == 2, output
