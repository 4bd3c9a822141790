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
