"""The payment page in headless Chromium: values, QR code, live flip, wallet button, layout."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import pytest
import zxingcpp
from PIL import Image
from playwright.async_api import Browser, BrowserContext, Page, expect

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.web.page.i18n import ENGLISH, PageLocale
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.chain import read_view
from tests.support.payment_page import (
    CONTRAST_JS,
    DESKTOP,
    FLIP_TIMEOUT_MS,
    PAYER,
    PHONE,
    WALLET_JS,
    InjectedWallet,
    create,
    funded_payer,
)

pytestmark = pytest.mark.browser


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
