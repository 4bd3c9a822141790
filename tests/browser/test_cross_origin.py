"""A merchant's own page on another origin calls the service from headless Chromium: the
client-facing routes answer (CORS preflight included), /integration/* is refused by the
browser."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from playwright.async_api import Browser

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.factory import sign_typed
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.browser

# The shop's checkout script: what a wallet front end on the merchant's domain does.
SHOP_SCRIPT = """
const { api, paymentAddress, owner, apiKey, feeBody } = JSON.parse(
  document.getElementById("config").textContent
);
async function attempt(url, init) {
  try {
    const response = await fetch(url, init);
    return { status: response.status, body: await response.json() };
  } catch (error) {
    return { error: String(error) };
  }
}
window.results = {
  status: await attempt(`${api}/pay/${paymentAddress}/status`),
  fee: await attempt(`${api}/fees/set-meta`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(feeBody),
  }),
  integration: await attempt(`${api}/integration/invoices?ownerAddress=${owner}`, {
    headers: { "x-service-api-key": apiKey },
  }),
};
document.body.dataset.done = "yes";
"""


def shop_app(config: dict[str, Any]) -> FastAPI:
    shop = FastAPI()
    page = (
        "<!doctype html><html><body><h1>Shop</h1>"
        f'<script type="application/json" id="config">{json.dumps(config)}</script>'
        f'<script type="module">{SHOP_SCRIPT}</script></body></html>'
    )

    @shop.get("/")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    return shop


async def test_a_page_on_another_origin_reads_status_and_relays_a_fee_but_not_integration(
    browser: Browser, page_app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(page_app.services, owner)
    created = await page_app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"},
        headers=key_headers(key),
    )
    invoice = created.json()
    deadline = int(time.time()) + 3600
    typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, 123, 0, deadline)
    fee_body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "feeBps": 123,
        "nonce": "0",
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner.key, typed).hex(),
    }
    config = {
        "api": page_app.base_url,
        "paymentAddress": invoice["paymentAddress"],
        "owner": owner.address,
        "apiKey": key,
        "feeBody": fee_body,
    }

    async with serve(shop_app(config)) as shop_url:
        assert shop_url.split(":")[-1] != page_app.base_url.split(":")[-1]  # another origin
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(shop_url + "/")
        await page.wait_for_selector("body[data-done=yes]", timeout=20_000)
        results = await page.evaluate("window.results")
        await context.close()
    settings = await page_app.http.get(
        "/integration/fees",
        params={"ownerAddress": owner.address, "chainId": dev.chain_id},
        headers=key_headers(key),
    )

    assert results["status"]["status"] == 200, results
    assert results["status"]["body"]["paymentAddress"] == invoice["paymentAddress"]
    assert results["fee"]["status"] == 202, results
    assert results["fee"]["body"]["status"] == "submitted"
    assert settings.json()["feeBps"] == 123
    # The browser refused to send the API-key request (its preflight got no CORS answer).
    assert "error" in results["integration"], results
    assert "Failed to fetch" in results["integration"]["error"]
