"""The payment page in headless Chromium: values, QR code, live flip, wallet button, layout."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import zxingcpp
from eth_account import Account
from eth_account.signers.local import LocalAccount
from PIL import Image
from playwright.async_api import Browser, BrowserContext, Page, expect

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.web.page.i18n import ENGLISH, PageLocale
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.chain import read_view
from tests.support.signing import new_owner

pytestmark = pytest.mark.browser

PAYER = DEV_PRIVATE_KEYS[7]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
FLIP_TIMEOUT_MS = 20_000

# Contrast ratio (WCAG) of every visible text element against its effective background.
CONTRAST_JS = """
() => {
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const rgba = (s) => s.match(/[\\d.]+/g).map(Number);
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgba(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const worst = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!el.offsetParent && el.tagName !== "BODY") continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const fg = lum(rgba(getComputedStyle(el).color).slice(0, 3));
    const bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    worst.push([el.id || el.tagName, Math.round(ratio * 100) / 100]);
  }
  return worst;
}
"""

WALLET_JS = """
window.ethereum = {
  isInjectedWallet: true,
  request: async (args) => {
    const answer = await window.__walletRpc(args.method, JSON.stringify(args.params || []));
    if (answer.error) {
      const error = new Error(answer.error.message);
      error.code = answer.error.code;
      throw error;
    }
    return answer.result;
  },
  on() {},
  removeListener() {},
};
"""


class InjectedWallet:
    """An EIP-1193 wallet for the page: it starts on mainnet (so the page must switch),
    signs with its own key and forwards the raw transaction to anvil."""

    def __init__(self, evm: EvmClient, account: LocalAccount, reject: bool = False) -> None:
        self.evm = evm
        self.account = account
        self.reject = reject
        self.chain_id = 1
        self.calls: list[tuple[str, Any]] = []
        self.sent: list[str] = []

    async def handle(self, method: str, params_json: str) -> dict[str, Any]:
        params = json.loads(params_json)
        self.calls.append((method, params))
        if method == "eth_requestAccounts":
            return {"result": [self.account.address]}
        if method == "eth_chainId":
            return {"result": hex(self.chain_id)}
        if method == "wallet_switchEthereumChain":
            self.chain_id = int(params[0]["chainId"], 16)
            return {"result": None}
        if method == "eth_sendTransaction":
            if self.reject:
                return {"error": {"code": 4001, "message": "User rejected the request."}}
            tx = params[0]
            assert tx["from"] == self.account.address
            receipt = await self.evm.transact(
                self.account.key.to_0x_hex(),
                tx["to"],
                bytes.fromhex(tx.get("data", "0x")[2:]),
                value=int(tx["value"], 16),
            )
            assert receipt["status"] == 1
            self.sent.append(receipt["transactionHash"])
            return {"result": receipt["transactionHash"]}
        return {"error": {"code": 4200, "message": f"unsupported method {method}"}}


async def create(app: RunningApp, dev: DevDeployment, **fields: Any) -> dict[str, Any]:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}
    response = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
    assert response.status_code == 201, response.text
    invoice: dict[str, Any] = response.json()
    invoice["_key"] = key
    return invoice


async def create_expired(app: RunningApp, dev: DevDeployment, **fields: Any) -> dict[str, Any]:
    """An invoice whose `expiresAt` has just passed. It is created to expire 1 s later; on a
    loaded machine a create can take longer than that (refused: `expiresAt` in the past), so
    it is sent again with twice the time, up to 16 s."""
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    margin_ms = 1_000
    while True:
        expires_at = int(time.time() * 1000) + margin_ms
        body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
        response = await app.http.post(
            "/integration/invoices",
            json={**body, **fields, "expiresAt": expires_at},
            headers=key_headers(key),
        )
        if response.status_code == 201:
            break
        assert response.json()["error"]["details"] == {"field": "expiresAt"}, response.text
        assert margin_ms < 16_000, response.text
        margin_ms *= 2
    await asyncio.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.2)
    invoice: dict[str, Any] = response.json()
    invoice["_key"] = key
    return invoice


async def open_page(
    browser: Browser, url: str, viewport: dict[str, int] = DESKTOP, **options: Any
) -> tuple[BrowserContext, Page, list[str]]:
    context = await browser.new_context(viewport=viewport, **options)
    page = await context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await page.goto(url)
    return context, page, requests


async def decode_qr(page: Page) -> str:
    await page.wait_for_function(
        "() => { const i = document.getElementById('qr');"
        " return i.complete && i.naturalWidth > 0; }"
    )
    png = await page.locator("#qr").screenshot()
    results = zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))
    assert len(results) == 1
    return str(results[0].text)


async def funded_payer(evm: EvmClient, dev: DevDeployment, token_raw: int = 0) -> LocalAccount:
    account: LocalAccount = Account.create()
    await evm.call_rpc("anvil_setBalance", [account.address, hex(10**20)])
    if token_raw:
        await evm.transact(
            PAYER, dev.token, encode_call(TEST_TOKEN, "mint", account.address, token_raw)
        )
    return account


async def test_page_shows_the_invoice_and_a_qr_code_of_the_eip681_uri(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, artifacts: Path
) -> None:
    expires_at = int(time.time() * 1000) + 90 * 60_000 + 30_000
    invoice = await create(
        page_app, dev, amount="0.125", expiresAt=expires_at, description="Order #1001: 2 mugs"
    )
    escrow = invoice["paymentAddress"]
    url = f"{page_app.base_url}/pay/{escrow}"

    context, page, requests = await open_page(browser, url)
    try:
        await expect(page.locator("#countdown")).to_be_visible()
        uri = await decode_qr(page)
        texts = {
            name: await page.locator(f"#{name}").inner_text()
            for name in ("status", "amount", "remaining", "network", "address", "description")
        }
        countdown = await page.locator("#countdown").inner_text()
        await page.screenshot(path=artifacts / "payment-page-desktop.png", full_page=True)
        contrast = await page.evaluate(CONTRAST_JS)
    finally:
        await context.close()

    assert uri == f"ethereum:{escrow}@{dev.chain_id}?value=125000000000000000"
    assert texts == {
        "status": "Awaiting payment",
        "amount": "0.125",
        "remaining": "0.125",
        "network": "Anvil (local)",
        "address": escrow,
        "description": "Order #1001: 2 mugs",
    }
    assert re.fullmatch(r"\(01:30:(2\d|30) left\)", countdown), countdown
    assert [ratio for _, ratio in contrast if ratio < 4.5] == [], contrast
    assert all(r.startswith(page_app.base_url + "/") for r in requests), requests


async def test_erc20_page_fits_a_phone_and_its_qr_decodes(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, artifacts: Path
) -> None:
    invoice = await create(page_app, dev, amount="49.99", tokenAddress=dev.token)
    escrow = invoice["paymentAddress"]

    context, page, _ = await open_page(
        browser, f"{page_app.base_url}/pay/{escrow}", PHONE, device_scale_factor=2
    )
    try:
        uri = await decode_qr(page)
        overflow = await page.evaluate("document.documentElement.scrollWidth - innerWidth")
        visible = [
            await page.locator(f"#{name}").is_visible()
            for name in ("amount", "address", "copy", "qr", "countdown", "status")
        ]
        symbol = await page.locator(".symbol").first.inner_text()
        await page.screenshot(path=artifacts / "payment-page-phone.png", full_page=True)
    finally:
        await context.close()

    assert uri == f"ethereum:{dev.token}@{dev.chain_id}/transfer?address={escrow}&uint256=49990000"
    assert overflow == 0
    assert visible == [True] * 6
    assert symbol == "TUSD"


async def test_payment_on_anvil_flips_the_page_to_paid_without_a_reload(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient, artifacts: Path
) -> None:
    invoice = await create(page_app, dev, amount="10", tokenAddress=dev.token)
    escrow = invoice["paymentAddress"]
    context, page, _ = await open_page(browser, f"{page_app.base_url}/pay/{escrow}", PHONE)
    try:
        await page.evaluate("window.__sameDocument = 'yes'")

        await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 4_000_000))
        await expect(page.locator("#remaining")).to_have_text("6", timeout=FLIP_TIMEOUT_MS)
        partial_uri = await decode_qr(page)
        await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 6_000_000))
        await expect(page.locator("#status")).to_have_text(
            "Payment received", timeout=FLIP_TIMEOUT_MS
        )

        same_document = await page.evaluate("window.__sameDocument")
        pay_section_visible = await page.locator("#pay-section").is_visible()
        done_text = await page.locator("#done-text").inner_text()
        remaining = await page.locator("#remaining").inner_text()
        await page.screenshot(path=artifacts / "payment-page-phone-paid.png", full_page=True)
    finally:
        await context.close()

    assert partial_uri == (
        f"ethereum:{dev.token}@{dev.chain_id}/transfer?address={escrow}&uint256=6000000"
    )
    assert same_document == "yes"
    assert pay_section_visible is False
    assert done_text == "Thank you: your payment has arrived. You can close this page."
    assert remaining == "0"


@pytest.mark.parametrize("in_token", [False, True], ids=["native", "erc20"])
async def test_wallet_button_pays_through_an_eip1193_provider(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient, in_token: bool
) -> None:
    fields = {"amount": "2.5", "tokenAddress": dev.token} if in_token else {"amount": "0.3"}
    invoice = await create(page_app, dev, **fields)
    escrow = invoice["paymentAddress"]
    required = 2_500_000 if in_token else 3 * 10**17
    wallet = InjectedWallet(evm, await funded_payer(evm, dev, token_raw=10_000_000))
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.expose_function("__walletRpc", wallet.handle)
        await page.add_init_script(WALLET_JS)
        await page.goto(f"{page_app.base_url}/pay/{escrow}")

        await page.locator("#wallet").click()
        await expect(page.locator("#status")).to_have_text(
            "Payment received", timeout=FLIP_TIMEOUT_MS
        )
        message = await page.locator("#wallet-message").get_attribute("data-tx-hash")
    finally:
        await context.close()

    token_balance = await read_view(evm, dev.token, ERC20, "balanceOf", escrow)
    balance = token_balance if in_token else await evm.get_balance(escrow)
    assert balance == required
    assert [method for method, _ in wallet.calls] == [
        "eth_requestAccounts",
        "eth_chainId",
        "wallet_switchEthereumChain",
        "eth_sendTransaction",
    ]
    assert wallet.calls[2][1] == [{"chainId": hex(dev.chain_id)}]
    sent = wallet.calls[3][1][0]
    if in_token:
        assert sent == {
            "from": wallet.account.address,
            "to": dev.token,
            "value": "0x0",
            "data": "0x" + encode_call(TEST_TOKEN, "transfer", escrow, required).hex(),
        }
    else:
        assert sent == {"from": wallet.account.address, "to": escrow, "value": hex(required)}
    assert message == wallet.sent[0]


async def test_rejected_wallet_request_shows_why_and_sends_nothing(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    invoice = await create(page_app, dev, amount="0.2")
    escrow = invoice["paymentAddress"]
    wallet = InjectedWallet(evm, await funded_payer(evm, dev), reject=True)
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.expose_function("__walletRpc", wallet.handle)
        await page.add_init_script(WALLET_JS)
        await page.goto(f"{page_app.base_url}/pay/{escrow}")

        await page.locator("#wallet").click()
        await expect(page.locator("#wallet-message")).to_have_text(
            "You rejected the request in your wallet."
        )
        status = await page.locator("#status").inner_text()
        button_enabled = await page.locator("#wallet").is_enabled()
    finally:
        await context.close()

    assert status == "Awaiting payment"
    assert button_enabled is True
    assert wallet.sent == []
    assert await evm.get_balance(escrow) == 0


async def test_page_without_javascript_shows_everything_static(
    browser: Browser, page_app: RunningApp, dev: DevDeployment
) -> None:
    invoice = await create(page_app, dev, amount="7", tokenAddress=dev.token)
    escrow = invoice["paymentAddress"]

    context, page, _ = await open_page(
        browser, f"{page_app.base_url}/pay/{escrow}", PHONE, java_script_enabled=False
    )
    try:
        uri = await decode_qr(page)
        shown = {
            name: await page.locator(f"#{name}").is_visible()
            for name in ("amount", "remaining", "address", "expires", "qr", "uri")
        }
        hidden = {
            name: await page.locator(f"#{name}").is_visible()
            for name in ("copy", "wallet", "countdown", "done-section")
        }
        status = await page.locator("#status").inner_text()
        expires = await page.locator("#expires").inner_text()
    finally:
        await context.close()

    assert uri == f"ethereum:{dev.token}@{dev.chain_id}/transfer?address={escrow}&uint256=7000000"
    assert shown == dict.fromkeys(shown, True)
    assert hidden == dict.fromkeys(hidden, False)
    assert status == "Awaiting payment"
    assert expires == PageLocale(ENGLISH).time(invoice["expiresAt"])


async def test_copy_button_puts_the_address_on_the_clipboard(
    browser: Browser, page_app: RunningApp, dev: DevDeployment
) -> None:
    invoice = await create(page_app, dev)
    escrow = invoice["paymentAddress"]
    context, page, _ = await open_page(browser, f"{page_app.base_url}/pay/{escrow}")
    try:
        await context.grant_permissions(
            ["clipboard-read", "clipboard-write"], origin=page_app.base_url
        )
        await page.locator("#copy").click()
        await expect(page.locator("#copy")).to_have_text("Copied")
        clipboard = await page.evaluate("navigator.clipboard.readText()")
    finally:
        await context.close()

    assert clipboard == escrow


async def test_unknown_address_shows_the_404_page(browser: Browser, page_app: RunningApp) -> None:
    context = await browser.new_context(viewport=PHONE)
    try:
        page = await context.new_page()
        response = await page.goto(f"{page_app.base_url}/pay/0x{'cd' * 20}")
        assert response is not None
        title = await page.locator("#error-title").inner_text()
        overflow = await page.evaluate("document.documentElement.scrollWidth - innerWidth")
    finally:
        await context.close()

    assert response.status == 404
    assert title == "Payment not found"
    assert overflow == 0


@pytest.mark.parametrize("lang", ["en", "ar"])
async def test_a_fiat_invoice_shows_its_price_in_the_page_language(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, artifacts: Path, lang: str
) -> None:
    invoice = await create(page_app, dev, amount="19.99", currency="USD", tokenAddress=dev.token)
    shown = {"en": "$19.99", "ar": "\u200f19.99\xa0US$"}

    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context, page, _requests = await open_page(
            browser, f"{page_app.base_url}/pay/{invoice['paymentAddress']}?lang={lang}", viewport
        )
        try:
            await expect(page.locator("#price")).to_have_text(shown[lang])
            await expect(page.locator("#amount")).to_have_text("19.99")
            assert await axe_violations(page) == []
            await page.screenshot(path=artifacts / f"payment-page-fiat-{lang}-{name}.png")
        finally:
            await context.close()
