"""Invoices as x402 v2 resources, paid on anvil by the official clients: the PyPI ``x402``
package (httpx) and the npm ``@x402/fetch`` one. The 402 says exactly what to pay; the
paid request answers 200 with PAYMENT-RESPONSE and the invoice, paid; refusals are 402 with
the x402 specification's reason and nothing sent."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.signers import EthAccountSigner

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.gasless import (
    funded_payer,
    gasless_rows,
    opted_in_invoice,
    sent_for,
)
from tests.support.x402 import payment_header

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_CLIENT = REPO_ROOT / "tests" / "js" / "x402_fetch.mjs"


def decoded(header: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.b64decode(header))
    return value


async def test_a_get_without_payment_says_exactly_what_to_pay(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = Account.create().address
    invoice = await opted_in_invoice(app.services, owner, "1.5")
    url = f"/pay/{invoice.payment_address}/x402"

    answer = await app.http.get(url)

    assert answer.status_code == 402
    required = decoded(answer.headers["PAYMENT-REQUIRED"])
    assert required == {
        "x402Version": 2,
        "error": "PAYMENT-SIGNATURE header is required",
        "resource": {
            "url": f"{app.base_url}{url}",
            "description": f"Invoice {invoice.invoice_id}",
            "mimeType": "application/json",
        },
        "accepts": [
            {
                "scheme": "exact",
                "network": f"eip155:{dev.chain_id}",
                "amount": "1500000",
                "asset": dev.token,
                "payTo": invoice.payment_address,
                "maxTimeoutSeconds": 300,
                "extra": {"name": "Test USD", "version": "1"},
            }
        ],
    }
    assert answer.json() == required


async def test_the_pypi_x402_client_pays_an_invoice(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner = Account.create().address
    invoice = await opted_in_invoice(app.services, owner, "1.5")
    payer = await funded_payer(evm, dev, 2_000_000)
    # Not a default asset of the library: the payer allows it (with a cap), as a program would.
    allowed = {"network": f"eip155:{dev.chain_id}", "asset": dev.token}
    client = x402Client().set_spend_controls(
        {"allowed_assets": [{**allowed, "max_amount_per_payment": "2000000"}]}  # type: ignore[typeddict-item]
    )
    register_exact_evm_client(client, EthAccountSigner(payer))

    async with x402HttpxClient(client, base_url=app.base_url, timeout=60) as http:
        answer = await http.get(f"/pay/{invoice.payment_address}/x402")

    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "paid"
    assert answer.json()["balanceRaw"] == "1500000"
    settled = decoded(answer.headers["PAYMENT-RESPONSE"])
    (row,) = await gasless_rows(app.services, invoice.id)
    assert settled == {
        "success": True,
        "transaction": row.tx_hash,
        "network": f"eip155:{dev.chain_id}",
        "payer": payer.address,
    }
    assert await evm.get_balance(payer.address) == 0


async def test_the_npm_x402_fetch_client_pays_an_invoice(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    node = shutil.which("node")
    assert node is not None
    owner = Account.create().address
    invoice = await opted_in_invoice(app.services, owner, "0.75")
    payer = await funded_payer(evm, dev, 1_000_000)
    # Asynchronously: the app answers on this test's event loop.
    process = await asyncio.create_subprocess_exec(
        node, str(FETCH_CLIENT), "0x" + bytes(payer.key).hex(),
        f"{app.base_url}/pay/{invoice.payment_address}/x402", f"eip155:{dev.chain_id}",
        dev.token, "1000000", cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode == 0, stderr.decode()
    answer = json.loads(stdout)
    assert answer["status"] == 200
    assert answer["body"]["status"] == "paid"
    assert decoded(answer["paymentResponse"])["success"] is True
    assert await sent_for(app.services, owner) == 1


async def test_every_refusal_is_a_402_with_its_reason_and_sends_nothing(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner = Account.create().address
    invoice = await opted_in_invoice(app.services, owner, "1.5")
    payer = await funded_payer(evm, dev, 2_000_000)
    poor = await funded_payer(evm, dev, 1)
    url = f"/pay/{invoice.payment_address}/x402"
    value = "invalid_exact_evm_payload_authorization_value_mismatch"
    recipient = "invalid_exact_evm_payload_recipient_mismatch"
    other = Account.create().address
    header = partial(payment_header, evm, dev)
    cases = [
        (await header(payer, invoice, value=1), value),
        (await header(payer, invoice, to=other), recipient),
        (await header(payer, invoice, accepted={"network": "eip155:1"}), "invalid_network"),
        (await header(payer, invoice, accepted={"scheme": "upto"}), "invalid_scheme"),
        (await header(payer, invoice, accepted={"amount": "1"}), value),
        (await header(payer, invoice, accepted={"payTo": other}), recipient),
        (await header(payer, invoice, x402Version=1), "invalid_x402_version"),
        (await header(poor, invoice), "insufficient_funds"),
        ("not base64!", "invalid_payload"),
        (base64.b64encode(b'{"a":1,"a":2}').decode(), "invalid_payload"),
        (base64.b64encode(b'{"x402Version":2.0}').decode(), "invalid_payload"),
    ]
    for header, reason in cases:
        answer = await app.http.get(url, headers={"PAYMENT-SIGNATURE": header})
        assert answer.status_code == 402, (reason, answer.text)
        assert decoded(answer.headers["PAYMENT-RESPONSE"])["errorReason"] == reason
        assert decoded(answer.headers["PAYMENT-REQUIRED"])["accepts"][0]["amount"] == "1500000"
    assert await sent_for(app.services, owner) == 0
    assert await gasless_rows(app.services, invoice.id) == []


async def test_every_owner_representation_of_an_eip3009_invoice_carries_its_x402_url(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = Account.create()
    headers = key_headers(await issue_api_key(app.services, owner))
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    token = await app.http.post(
        "/integration/invoices", json={**body, "tokenAddress": dev.token}, headers=headers
    )
    native = await app.http.post("/integration/invoices", json=body, headers=headers)
    escrow = token.json()["paymentAddress"]

    assert token.json()["x402Url"] == f"http://pay.test/pay/{escrow}/x402"
    assert "x402Url" not in native.json()
    status = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner.address, "paymentAddress": escrow},
        headers=headers,
    )
    assert status.json()["invoice"]["x402Url"] == token.json()["x402Url"]
    listed = await app.http.get(
        "/integration/invoices", params={"ownerAddress": owner.address}, headers=headers
    )
    urls = {item["paymentAddress"]: item.get("x402Url") for item in listed.json()["items"]}
    assert urls == {escrow: token.json()["x402Url"], native.json()["paymentAddress"]: None}
