"""The whole journey on `invoicing dev`, as an integrator sees it: key, invoice, payment,
webhook, withdrawal to the owner's wallet with the exact amount."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.evm import EvmClient
from tests.support.journey import INVOICING, poll_status, wait_ready
from tests.support.openapi_check import ResponseChecker
from tests.support.receiver import receiver
from tests.support.server import free_port
from tests.support.signing import new_owner, signed_headers

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

PAYER = DEV_PRIVATE_KEYS[7]
RELAYER_KEY = DEV_PRIVATE_KEYS[0]  # what `invoicing dev` relays and sweeps with
SECRET = "journey-secret-" + "j" * 32


async def test_invoice_paid_notified_and_withdrawn(tmp_path: Path) -> None:
    ready_file = tmp_path / "ready.json"
    env = {
        **os.environ,
        "INVOICING_MONITOR_INTERVAL_S": "1",
        "INVOICING_WITHDRAWAL_INTERVAL_S": "2",
        "INVOICING_WEBHOOK_RETRY_DELAY_S": "1",
        "INVOICING_SECRET": SECRET,
    }
    log_file = tmp_path / "dev.log"
    log = log_file.open("w")
    process = await asyncio.create_subprocess_exec(
        *[
            INVOICING,
            "dev",
            "--port",
            str(free_port()),
            "--chain-port",
            str(free_port()),
            "--ready-file",
            str(ready_file),
            "--database-url",
            f"sqlite:///{tmp_path}/dev.db",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    owner = new_owner()
    checker = ResponseChecker()  # every response, checked against openapi.json
    try:
        ready = await wait_ready(ready_file, process)
        evm = EvmClient.connect(str(ready["rpc_url"]))
        async with (
            receiver() as hooks,
            httpx.AsyncClient(
                base_url=str(ready["base_url"]), event_hooks={"response": [checker.hook()]}
            ) as http,
        ):
            # An API key, issued through signature mode.
            issued = await http.post(
                "/integration/api-keys",
                json={"ownerAddress": owner.address, "label": "shop"},
                headers=signed_headers(owner, "apikey.create", {"label": "shop"}),
            )
            assert issued.status_code == 201, issued.text
            key = issued.json()["apiKey"]

            created = await http.post(
                "/integration/invoices",
                json={
                    "ownerAddress": owner.address,
                    "chainId": ready["chain_id"],
                    "amount": "0.75",
                    "invoiceId": "order-42",
                    "webhookUrl": hooks.url("/paid"),
                },
                headers={"x-service-api-key": key},
            )
            assert created.status_code == 201, created.text
            invoice = created.json()
            page = await http.get(f"/pay/{invoice['paymentAddress']}")
            assert page.status_code == 200 and "0.75" in page.text

            await evm.transact(PAYER, invoice["paymentAddress"], b"", value=75 * 10**16)
            (delivery,) = await hooks.wait_for("/paid", timeout_s=30)
            completed = await poll_status(
                http, key, owner.address, invoice["paymentAddress"], "completed"
            )
            owner_balance = await evm.get_balance(owner.address)
            escrow_balance = await evm.get_balance(invoice["paymentAddress"])
            await evm.aclose()
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), timeout=30)
        log.close()

    assert checker.problems == []
    assert delivery.headers["x-service-api-key"] == key
    assert delivery.headers["x-service-delivery-attempt"] == "1"
    assert delivery.body["invoiceId"] == "order-42"
    assert delivery.body["status"] == "paid" and delivery.body["paid"] is True
    assert delivery.body["requiredRaw"] == str(75 * 10**16)
    assert delivery.body["balance"] == 0.75
    assert completed["withdrawn"] is True and completed["withdrawnAt"] is not None
    # No fee is set: the owner receives exactly what was paid; nothing is left behind.
    assert owner_balance == 75 * 10**16
    assert escrow_balance == 0
    # The whole run's output (ready line, logs, errors) never shows the relayer key or secret.
    output = log_file.read_text()
    assert "INFO" in output
    assert RELAYER_KEY[2:].lower() not in output.lower()
    assert SECRET not in output
