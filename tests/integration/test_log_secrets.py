"""No log line ever holds a secret: a whole flow (an API key issued, invoices created with it
and with request signatures, paid on anvil, webhooks delivered, escrows swept, a fee relayed,
metrics scraped) runs with DEBUG-level JSON logs, then the lines are searched for every
secret the flow used."""

from __future__ import annotations

import asyncio
import io
import json
import time

import httpx
import pytest
from pydantic import SecretStr

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.log_capture import captured  # noqa: F401 - a fixture
from tests.support.receiver import receiver
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers
from tests.support.withdrawals import sign_typed

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[5]
RELAYER_KEY = DEV_PRIVATE_KEYS[0]  # the test chain's relayer (tests/conftest.chain_config)
SECRET = "log-secret-" + "q" * 40
METRICS_TOKEN = "log-metrics-" + "m" * 30


async def wait_status(
    http: httpx.AsyncClient, key: str, owner: str, address: str, wanted: str
) -> None:
    deadline = time.monotonic() + 60
    while True:
        response = await http.get(
            "/integration/invoices/status",
            params={"ownerAddress": owner, "paymentAddress": address},
            headers={"x-service-api-key": key},
        )
        if response.json()["invoice"]["status"] == wanted:
            return
        assert time.monotonic() < deadline, response.text
        await asyncio.sleep(0.2)


async def test_a_whole_flow_logs_no_secret(
    make_services: MakeServices,
    own_database: str,
    evm: EvmClient,
    dev: DevDeployment,
    captured: io.StringIO,  # noqa: F811 - the fixture imported above
) -> None:
    services = await make_services(
        database_url=own_database,
        secret=SecretStr(SECRET),
        metrics_token=SecretStr(METRICS_TOKEN),
        monitor_poll_interval_s=0.1,
        webhook_poll_interval_s=0.05,
        withdrawal_interval_s=0.5,
        settlement_poll_interval_s=0.1,
    )
    owner = new_owner()
    base_body = {"ownerAddress": owner.address, "chainId": dev.chain_id}
    async with (
        receiver() as hooks,
        serve(create_app(services, run_workers_in_process=True)) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as http,
    ):
        issued = await http.post(
            "/integration/api-keys",
            json={"ownerAddress": owner.address, "label": "shop"},
            headers=signed_headers(owner, "apikey.create", {"label": "shop"}),
        )
        assert issued.status_code == 201, issued.text
        key = issued.json()["apiKey"]
        # A signing secret, so the paid webhooks below are signed deliveries.
        signing = await http.post(
            "/integration/webhook-secrets",
            json={"ownerAddress": owner.address},
            headers={"x-service-api-key": key},
        )
        assert signing.status_code == 201, signing.text
        signing_secret = signing.json()["secret"]
        by_key = await http.post(
            "/integration/invoices",
            json=base_body | {"amount": "0.001", "webhookUrl": hooks.url("/key")},
            headers={"x-service-api-key": key},
        )
        signed_body = {"chainId": dev.chain_id, "amount": "0.002", "webhookUrl": hooks.url("/sig")}
        by_signature = await http.post(
            "/integration/invoices",
            json={"ownerAddress": owner.address, **signed_body},
            headers=signed_headers(owner, "invoice.create", signed_body),
        )
        assert (by_key.status_code, by_signature.status_code) == (201, 201), by_signature.text
        invoices = [by_key.json(), by_signature.json()]
        for invoice in invoices:
            await evm.transact(
                PAYER_KEY, invoice["paymentAddress"], value=int(invoice["requiredRaw"])
            )
        await hooks.wait_for("/key", timeout_s=30)
        await hooks.wait_for("/sig", timeout_s=30)
        for invoice in invoices:
            await wait_status(http, key, owner.address, invoice["paymentAddress"], "completed")

        deadline = int(time.time()) + 600
        typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, 100, 0, deadline)
        fee = await http.post(
            "/integration/fees/set-meta",
            json=base_body
            | {
                "feeBps": 100,
                "nonce": "0",
                "deadline": str(deadline),
                "signature": "0x" + sign_typed(owner, typed).hex(),
            },
            headers={"x-service-api-key": key},
        )
        assert fee.status_code == 202, fee.text
        await evm.wait_for_receipt(fee.json()["txHash"])
        scraped = await http.get("/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"})
        assert scraped.status_code == 200

    text = captured.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    debug = [line for line in lines if line["level"] == "DEBUG"]
    assert any(str(line["event"]).startswith("webhook event ") for line in debug)
    assert all({"time", "level", "logger", "event"} <= set(line) for line in lines)
    secrets = {
        "the API key": key,
        "the owner's private key": owner.key.hex().removeprefix("0x"),
        "the relayer's private key": RELAYER_KEY.removeprefix("0x"),
        "INVOICING_SECRET": SECRET,
        "the metrics token": METRICS_TOKEN,
        "the webhook signing secret": signing_secret,
    }
    leaked = [name for name, secret in secrets.items() if secret.lower() in text.lower()]
    assert leaked == []
    # The search looked at the flow's own lines: the fee relay was logged for this owner.
    recorded = "recorded set_fee"
    relayed = [line for line in lines if fee.json()["txHash"] in str(line["event"])]
    (line,) = [line for line in relayed if recorded in str(line["event"])]
    assert (line["owner"], line["chain_id"]) == (owner.address, dev.chain_id)
