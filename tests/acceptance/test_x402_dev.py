"""Both x402 clients pay invoices of `invoicing dev` (the ready line's owner and key), as a
program would against `make run`: the PyPI ``x402`` client and the npm ``@x402/fetch`` one."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.signers import EthAccountSigner

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from tests.support.dev_service import shared_dev

pytestmark = pytest.mark.acceptance

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_CLIENT = REPO_ROOT / "tests" / "js" / "x402_fetch.mjs"


def tusd_invoice(ready: dict[str, Any], amount: str) -> dict[str, Any]:
    """A TUSD invoice of the dev owner, with gasless payments turned on for the chain."""
    headers = {"x-service-api-key": ready["api_key"]}
    base = {"ownerAddress": ready["owner"], "chainId": ready["chain_id"]}
    with httpx.Client(base_url=ready["base_url"], headers=headers, timeout=30) as http:
        assert http.post("/integration/gasless", json={**base, "enabled": True}).is_success
        body = {**base, "amount": amount, "tokenAddress": ready["tokens"]["TUSD"]}
        created = http.post("/integration/invoices", json=body)
    assert created.status_code == 201, created.text
    invoice: dict[str, Any] = created.json()
    assert invoice["x402Url"].endswith(f"/pay/{invoice['paymentAddress']}/x402")
    return invoice


def test_the_pypi_and_npm_x402_clients_pay_invoices_of_invoicing_dev(
    request: pytest.FixtureRequest,
) -> None:
    ready = shared_dev(request.config).ready
    network, tusd = f"eip155:{ready['chain_id']}", ready["tokens"]["TUSD"]
    allowed = {"network": network, "asset": tusd, "max_amount_per_payment": "5000000"}

    first = tusd_invoice(ready, "1.25")
    payer = Account.from_key(DEV_PRIVATE_KEYS[6])
    client = x402Client().set_spend_controls({"allowed_assets": [allowed]})  # type: ignore[typeddict-item]
    register_exact_evm_client(client, EthAccountSigner(payer))

    async def pay() -> httpx.Response:
        async with x402HttpxClient(client, timeout=60) as http:
            return await http.get(first["x402Url"])

    paid = asyncio.run(pay())
    assert paid.status_code == 200, paid.text
    assert paid.json()["status"] == "paid"
    assert json.loads(base64.b64decode(paid.headers["PAYMENT-RESPONSE"]))["success"] is True

    second = tusd_invoice(ready, "0.5")
    node = shutil.which("node")
    assert node is not None
    result = subprocess.run(
        [node, str(FETCH_CLIENT), DEV_PRIVATE_KEYS[7], second["x402Url"], network, tusd,
         "5000000"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"] == 200 and answer["body"]["status"] == "paid"
