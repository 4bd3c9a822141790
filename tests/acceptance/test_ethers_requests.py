"""A JavaScript client signing with ethers.js drives POST, GET and DELETE in signature mode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from invoicing.chain.deploy import DevDeployment
from tests.conftest import RunningApp
from tests.support.signing import new_owner

pytestmark = pytest.mark.acceptance

SCRIPT = Path(__file__).resolve().parents[1] / "js" / "request_client.mjs"


async def test_ethers_signed_requests_are_accepted(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        app.base_url,
        owner.key.to_0x_hex(),
        str(dev.chain_id),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=SCRIPT.parents[2],
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    result = json.loads(stdout)

    assert result["owner"] == owner.address
    assert result["created"]["status"] == 201, result["created"]
    created = result["created"]["body"]
    assert created["invoiceId"] == "js-1"
    assert created["requiredRaw"] == "12500000000000000000"
    assert created["description"] == "Paid from ethers.js ✓"
    assert created["metadata"] == {"order": {"id": 7, "items": ["a", "b"]}}
    assert result["status"]["status"] == 200
    assert result["status"]["body"]["invoice"]["id"] == created["id"]
    assert result["removed"] == {
        "status": 200,
        "body": {"deleted": True, "invoiceId": "js-1", "chainId": dev.chain_id},
    }


TYPED_SCRIPT = SCRIPT.parent / "typed_requests.mjs"


async def test_ethers_typed_values_are_accepted_on_every_get_and_delete(
    app: RunningApp, dev: DevDeployment
) -> None:
    """Values signed as a JavaScript client holds them: numbers, booleans, and strings that
    look like numbers ("42"); POST numbers as JSON.stringify writes them (1e-7, 1e+21)."""
    owner = new_owner()
    process = await asyncio.create_subprocess_exec(
        "node",
        str(TYPED_SCRIPT),
        app.base_url,
        owner.key.to_0x_hex(),
        str(dev.chain_id),
        dev.token,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=SCRIPT.parents[2],
    )
    stdout, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    results = json.loads(stdout)["results"]

    statuses = {name: result["status"] for name, result in results.items()}
    assert statuses == {
        "create": 201,
        "issued": 201,
        "status": 200,
        "list": 200,
        "webhooks": 200,
        "fees": 200,
        "export": 200,
        "keys": 200,
        "revoke": 200,
        "delete": 200,
        "deleteAgain": 200,
    }, results
    created = results["create"]["body"]
    assert created["invoiceId"] == "42"
    assert created["metadata"] == {
        "tiny": 1e-7,
        "huge": 1e21,
        "round": 10**16,
        "tenth": 0.1,
        "whole": 3,
        "neg": -2.5e-9,
    }
    assert results["delete"]["payload"] == {"chainId": dev.chain_id, "invoiceId": "42"}
    assert results["list"]["payload"]["paid"] is False
    assert [item["invoiceId"] for item in results["list"]["body"]["items"]] == ["42"]
    assert results["status"]["body"]["invoice"]["paymentAddress"] == created["paymentAddress"]
    assert results["fees"]["body"] == {
        "feeBps": 0,
        "payoutAddress": None,
        "nonce": "0",
        "factory": dev.factory,
    }
    # One escrow: its one NDJSON line is a JSON object.
    assert results["export"]["body"]["paymentAddress"] == created["paymentAddress"]
    assert results["revoke"]["body"]["revoked"] is True
    assert results["delete"]["body"] == {
        "deleted": True,
        "invoiceId": "42",
        "chainId": dev.chain_id,
    }
    assert results["deleteAgain"]["body"] == results["delete"]["body"]
