"""Schemathesis drives every route of the committed openapi.json against the real app
(``tests/support/schemathesis_run.py``, in its own process): generated requests, valid and
invalid by the schema, with an API key and signed by the owner wallet, each checked for no
5xx and for a status, content type, headers and body that the document describes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount

from invoicing.chain.deploy import DevDeployment
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# Processes generating cases at once (generation is CPU-bound; the server is light).
SHARDS = 2


@pytest.mark.timeout(300)  # about a minute on an idle 2-core machine; slack for a busy one
async def test_generated_requests_get_documented_answers_and_no_5xx(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    # Limits off so that generated requests reach the routes' own work, not 429.
    services = await make_services(
        owner_rate_limit_per_minute=0,
        fee_rate_limit_per_minute=0,
        api_key_issuance_per_hour=0,
        max_watched_invoices_per_owner=1_000_000,
        invoice_creation_per_owner_per_day=0,
    )
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        created = await http.post(
            "/integration/invoices",
            json={"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"},
            headers=key_headers(api_key),
        )
        assert created.status_code == 201, created.text
        runs = await asyncio.gather(
            *(
                drive(base_url, owner, api_key, dev.chain_id, created.json(), shard)
                for shard in range(SHARDS)
            )
        )
    statuses: Counter[int] = Counter()
    modes: Counter[str] = Counter()
    for run in runs:
        statuses.update({int(status): count for status, count in run["statuses"].items()})
        modes.update(run["modes"])
    seconds = max(run["seconds"] for run in runs)
    cpu_seconds = [run["cpu_seconds"] for run in runs]

    print(
        f"schemathesis: {sum(statuses.values())} requests in {seconds} s "
        f"(generator CPU s {cpu_seconds}): {dict(statuses)}"
    )
    assert [failure for run in runs for failure in run["failures"]] == []
    assert sum(statuses.values()) >= 1000
    assert not [status for status in statuses if status >= 500]
    assert modes["apiKey"] == modes["signature"] >= 450, modes
    # Requests got past authentication to the routes' own answers, good and bad.
    assert {200, 201, 400, 401, 403, 404} <= set(statuses), statuses


async def drive(
    base_url: str, owner: LocalAccount, api_key: str, chain_id: int, invoice: Any, shard: int
) -> Any:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.schemathesis_run",
        base_url,
        owner.key.to_0x_hex(),
        api_key,
        str(chain_id),
        invoice["paymentAddress"],
        str(shard),
        str(SHARDS),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()[-3000:]
    return json.loads(stdout)
