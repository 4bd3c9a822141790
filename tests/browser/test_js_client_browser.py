"""@invoicing/client in a real browser (headless Chromium): the library loaded as ES modules
with ethers' browser bundle, talking to the real API with fetch, signing with ethers, and
verifying a signed webhook with no Node APIs. The page and the API share one origin (the
integration routes are server-to-server, without CORS)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from invoicing.chain.deploy import DevDeployment
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.server import serve

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
PAGE = """<!doctype html><meta charset="utf-8"><title>sdk</title>
<script type="importmap">{"imports": {"ethers": "/ethers/ethers.js"}}</script>"""

# Runs in the page: both auth modes through the SDK, then webhooks.verify.
SCRIPT = """async ({ chainId, token, header, body }) => {
  const { Client, InvoiceExists, webhooks } = await import("/sdk/index.js");
  const { Wallet } = await import("ethers");
  const wallet = Wallet.createRandom();
  const signed = new Client({ baseUrl: location.origin, privateKey: wallet.privateKey });
  const issued = await signed.apiKeys.create("browser");
  const keyed = new Client({ baseUrl: location.origin, ownerAddress: wallet.address,
    apiKey: issued.apiKey });
  const created = await keyed.invoices.create({ chainId, amount: "49.99", tokenAddress: token,
    invoiceId: "browser-1", metadata: { note: "ünïcode ✓" } });
  const bySignature = await signed.invoices.create({ chainId, amount: "1",
    invoiceId: "browser-2" });
  const conflict = await keyed.invoices.create({ chainId, amount: "50", tokenAddress: token,
    invoiceId: "browser-1" }).catch((error) => error);
  const listed = [];
  for await (const invoice of signed.invoices.list({ pageSize: 1 })) listed.push(invoice.invoiceId);
  const status = await signed.invoices.status(created.paymentAddress);
  const fees = await keyed.fees.get(chainId);
  const verified = webhooks.verify({ "x-service-webhook-signature": header }, body,
    { signingSecret: "whsec_browser" });
  return {
    owner: wallet.address, apiKey: issued.apiKey,
    created: [created.created, typeof created.requiredRaw, String(created.requiredRaw),
      created.status],
    signature: bySignature.requestSignature,
    conflict: [conflict instanceof InvoiceExists, conflict.status, conflict.code],
    listed, status: status.invoiceId, nonce: String(fees.nonce), verified: verified.status,
  };
}"""


@pytest.fixture
async def sdk_origin(make_services: MakeServices) -> AsyncIterator[str]:
    """The real API, plus the SDK's sources and ethers' browser bundle, on one origin."""
    services = await make_services()
    site = Starlette(
        routes=[
            Route("/sdk.html", lambda _request: HTMLResponse(PAGE)),
            Mount("/sdk", StaticFiles(directory=REPO / "clients/js/src")),
            Mount("/ethers", StaticFiles(directory=REPO / "node_modules/ethers/dist")),
            Mount("/", create_app(services)),
        ]
    )
    async with serve(site) as base_url:  # type: ignore[arg-type]
        yield base_url


async def test_the_sdk_works_in_chromium(
    browser: Browser, sdk_origin: str, dev: DevDeployment
) -> None:
    body = json.dumps({"ownerAddress": "0x0", "status": "paid"})
    t = int(time.time())
    mac = hmac.new(b"whsec_browser", f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
    context = await browser.new_context()
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        await page.goto(f"{sdk_origin}/sdk.html")
        args = {"chainId": dev.chain_id, "token": dev.token, "header": f"t={t},v1={mac}"}
        result: dict[str, Any] = await page.evaluate(SCRIPT, {**args, "body": body})
    finally:
        await context.close()
    assert errors == []
    assert result["created"] == [True, "bigint", "49990000", "pending"]
    assert result["signature"].startswith("0x") and len(result["signature"]) == 132
    assert result["conflict"] == [True, 409, "invoice_exists"]
    assert result["listed"] == ["browser-2", "browser-1"]
    assert (result["status"], result["nonce"], result["verified"]) == ("browser-1", "0", "paid")
