"""The dashboard in headless Chromium with a wallet injected into the page (EIP-1193): sign in
with the wallet, create an invoice, see it paid live, refund part of it with the wallet's
signature; webhooks and API keys from the keyboard; the brand set in the dashboard and worn by
the payment page; axe-core on every page; screenshots at
desktop and phone width (test-artifacts/)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from playwright.async_api import Browser, BrowserContext, Page, expect

from invoicing.auth.sign_in import issue_link
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from tests.browser.conftest import axe_violations, logo_png
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import dashboard_app
from tests.support.events import deliver_due
from tests.support.payment_page import WALLET_JS, InjectedWallet, funded_payer
from tests.support.receiver import Receiver
from tests.support.withdrawals import settle_all

pytestmark = pytest.mark.browser

YELLOW = (250, 210, 0, 255)

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
LIVE_TIMEOUT_MS = 20_000
UINT_FIELDS = ("amount", "nonce", "deadline", "feeBps")


class SigningWallet(InjectedWallet):
    """The payment page's test wallet, which also signs: ``personal_sign`` (SIWE) and
    ``eth_signTypedData_v4`` (EIP-712), as a browser wallet does."""

    async def handle(self, method: str, params_json: str) -> dict[str, Any]:
        params = json.loads(params_json)
        if method == "personal_sign":
            self.calls.append((method, params))
            data_hex, address = params
            assert address == self.account.address
            message = encode_defunct(hexstr=data_hex)
            return {"result": self.account.sign_message(message).signature.to_0x_hex()}
        if method == "eth_signTypedData_v4":
            self.calls.append((method, params))
            address, typed_json = params
            assert address == self.account.address
            typed = json.loads(typed_json)
            typed["message"] = {
                k: int(v) if k in UINT_FIELDS else v for k, v in typed["message"].items()
            }
            signed = self.account.sign_typed_data(full_message=typed)
            return {"result": signed.signature.to_0x_hex()}
        return await super().handle(method, params_json)


@pytest.fixture
async def dash(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    # The service holds a refund delegate key: the settings offer to name it.
    async with dashboard_app(make_services, refund_delegate_key=DEV_PRIVATE_KEYS[9]) as app:
        yield app


async def wallet_context(
    browser: Browser, wallet: InjectedWallet | None, viewport: dict[str, int] = DESKTOP
) -> BrowserContext:
    context = await browser.new_context(viewport=viewport)
    if wallet is not None:
        await context.expose_function("__walletRpc", wallet.handle)
        await context.add_init_script(WALLET_JS)
    return context


async def no_serious_axe(page: Page) -> None:
    assert await axe_violations(page) == [], page.url


async def signed_in_by_link(app: RunningApp, page: Page, owner: str) -> None:
    token = await issue_link(app.services.db, owner, int(time.time() * 1000), 60_000)
    await page.goto(f"{app.base_url}/dashboard/login/link/{token}")
    await expect(page.locator("h1")).to_have_text("Overview")


async def test_sign_in_create_pay_live_and_refund_with_the_wallet(
    browser: Browser, dash: RunningApp, dev: DevDeployment, evm: EvmClient, artifacts: Path
) -> None:
    owner: LocalAccount = Account.create()
    wallet = SigningWallet(evm, owner)
    payer = await funded_payer(evm, dev)
    context = await wallet_context(browser, wallet)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        # Sign in: the wallet signs the service's EIP-4361 message.
        await page.goto(f"{dash.base_url}/dashboard/login")
        await no_serious_axe(page)
        await page.click("#sign-in")
        await expect(page.locator("h1")).to_have_text("Overview")
        assert [m for m, _ in wallet.calls][:3] == [
            "eth_requestAccounts",
            "eth_chainId",
            "personal_sign",
        ]
        await expect(page.locator(".who")).to_contain_text(owner.address)
        await no_serious_axe(page)

        # Create: 1 ETH, from the keyboard.
        await page.click("nav >> text=Create")
        await page.select_option("#c-asset", f"{dev.chain_id}:native")
        await page.fill("#c-amount", "1")
        await page.fill("#c-id", "browser-1")
        await page.fill("#c-description", "A test order")
        await page.press("#c-id", "Enter")
        await expect(page.locator("#hosted-url")).to_be_visible()
        hosted = await page.locator("#hosted-url").get_attribute("href")
        assert hosted is not None and hosted.startswith("http://pay.test/pay/0x")
        await page.wait_for_function(
            "() => { const i = document.getElementById('created-qr');"
            " return i.complete && i.naturalWidth > 0; }"
        )
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-create-desktop.png", full_page=True)

        # Pay it on anvil from another account: the open page turns paid without a reload.
        await page.click("#created-detail")
        await expect(page.locator("#status")).to_have_text("awaiting payment")
        await page.evaluate("window.__notReloaded = true")
        escrow = hosted.rsplit("/", 1)[1]
        await evm.transact(payer.key.to_0x_hex(), escrow, b"", value=10**18)
        await expect(page.locator("#status")).to_have_text("paid", timeout=LIVE_TIMEOUT_MS)
        await expect(page.locator("#received")).to_have_text("1")
        assert await page.evaluate("window.__notReloaded === true")

        # Refund a quarter: the wallet signs the EIP-712 Refund, the service relays it.
        before = await evm.get_balance(payer.address)
        await page.fill("#refund-to", payer.address)
        await page.fill("#refund-amount", "0.25")
        await page.click("#refund-form button[type=submit]")
        await expect(page.locator("#refund-status")).to_contain_text(
            "Refund sent", timeout=LIVE_TIMEOUT_MS
        )
        assert "eth_signTypedData_v4" in [m for m, _ in wallet.calls]
        await settle_all(dash.services)  # the settlement worker's tracking, run here
        await expect(page.locator("#transactions")).to_contain_text(
            "confirmed", timeout=LIVE_TIMEOUT_MS
        )
        assert await evm.get_balance(payer.address) - before == 25 * 10**16
        # (a native refund pays the rest to the owner, as a sweep would: docs/architecture.md)
        assert await evm.get_balance(owner.address) == 75 * 10**16
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-invoice-desktop.png", full_page=True)

        # The fee, signed in the wallet as EIP-712 SetFee and relayed.
        await page.click("nav >> text=Settings")
        await page.click("#fees > summary")  # a platform's setting, folded for a single shop
        await page.fill(f"#fee-{dev.chain_id}", "25")
        await page.click(f"#fee-form-{dev.chain_id} button[type=submit]")
        await expect(page.locator(f"#fee-form-{dev.chain_id} [data-status]")).to_contain_text(
            "Sent: transaction", timeout=LIVE_TIMEOUT_MS
        )
        await settle_all(dash.services)
        await page.reload()
        await expect(page.locator(f"#fees-{dev.chain_id}")).to_contain_text("25 bps (0.25%)")

        # The service's refund delegate, named in the wallet (EIP-712 SetRefundDelegate).
        delegate_form = page.locator(f"#delegate-form-{dev.chain_id}")
        await expect(delegate_form).to_contain_text("not named")
        await delegate_form.locator("button[type=submit]").click()
        await expect(delegate_form.locator("[data-status]")).to_contain_text(
            "Sent: transaction", timeout=LIVE_TIMEOUT_MS
        )
        await settle_all(dash.services)
        await page.reload()
        await expect(delegate_form).to_contain_text("named: your shop can refund")
        await expect(delegate_form.locator("button[type=submit]")).to_have_text("Sign and revoke")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-settings-delegate.png", full_page=True)

        # The list shows it, completed (the refund paid the rest out); then every page at
        # phone width.
        await page.click("nav >> text=Invoices")
        await expect(page.locator("#invoice-rows")).to_contain_text("browser-1")
        await expect(page.locator("#invoice-rows")).to_contain_text("completed")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-invoices-desktop.png", full_page=True)
        await page.click("nav >> text=Overview")
        await expect(page.locator("#count-completed .n")).to_have_text("1")
        # No reporting currency chosen: one chart per token, each with its legend.
        await expect(page.locator("figure.chart svg rect.bar")).to_have_count(1)
        await expect(page.locator("figure.chart li")).to_have_count(1)
        await page.screenshot(path=artifacts / "dashboard-overview-desktop.png", full_page=True)
        await page.set_viewport_size(PHONE)
        for name, path in (
            ("overview", "/dashboard"),
            ("invoices", "/dashboard/invoices"),
            ("create", "/dashboard/invoices/new"),
            ("webhooks", "/dashboard/webhooks"),
            ("api-keys", "/dashboard/api-keys"),
            ("settings", "/dashboard/settings"),
            ("reports", "/dashboard/reports"),
            ("team", "/dashboard/team"),
            ("email", "/dashboard/email"),
            ("brand", "/dashboard/brand"),
        ):
            await page.goto(dash.base_url + path)
            await no_serious_axe(page)
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (path, width)
            await page.screenshot(path=artifacts / f"dashboard-{name}-phone.png", full_page=True)
        await page.click("nav >> text=Invoices")
        await page.click("text=browser-1")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-invoice-phone.png", full_page=True)
    finally:
        await context.close()
    assert errors == []


async def tab_to(page: Page, selector: str, limit: int = 80) -> None:
    """Press Tab until ``selector`` has the focus (the keyboard path a user takes)."""
    target = page.locator(selector).first
    for _ in range(limit):
        if await target.evaluate("element => element === document.activeElement"):
            return
        await page.keyboard.press("Tab")
    raise AssertionError(f"{selector} is not reachable with Tab")


async def test_webhooks_and_keys_by_keyboard(
    browser: Browser, dash: RunningApp, hooks: Receiver, artifacts: Path
) -> None:
    owner = Account.create().address
    context = await wallet_context(browser, None)
    page = await context.new_page()
    try:
        await signed_in_by_link(dash, page, owner)

        # An API key, issued and revoked from the keyboard.
        await page.goto(f"{dash.base_url}/dashboard/api-keys")
        await tab_to(page, "#key-label")
        await page.keyboard.type("shop server")
        await page.keyboard.press("Enter")
        await expect(page.locator("#new-key-value")).to_contain_text("sk_")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-api-keys-desktop.png", full_page=True)
        await tab_to(page, '#keys button[aria-label="Revoke key shop server"]')
        await page.keyboard.press("Enter")
        await expect(page.locator("#keys")).to_contain_text("revoked")

        # An endpoint that fails: the test ping's failed attempt shows, then fixed, redelivered.
        hooks.default = 500
        await page.goto(f"{dash.base_url}/dashboard/webhooks")
        await tab_to(page, "#ep-url")
        await page.keyboard.type(hooks.url("/shop"))
        await page.keyboard.press("Enter")
        await expect(page.locator("#endpoints")).to_contain_text(hooks.url("/shop"))
        await tab_to(page, "#endpoints button:has-text('Send test ping')")
        await page.keyboard.press("Enter")
        await expect(page.locator(".notice")).to_have_text("Test ping queued")
        await deliver_due(dash.services)  # the webhook worker's pass, run here
        await page.click("#events a:has-text('ping')")
        await expect(page.locator("#event-deliveries")).to_contain_text("HTTP 500")
        await no_serious_axe(page)
        hooks.default = 200
        await tab_to(page, "button:has-text('Redeliver')")
        await page.keyboard.press("Enter")
        await expect(page.locator(".notice")).to_have_text("Redelivery queued")
        await deliver_due(dash.services)
        await page.goto(page.url.split("?")[0])
        await expect(page.locator("#event-deliveries")).to_contain_text("HTTP 200")
        assert len(hooks.at("/shop")) == 2

        # A signing secret: created (shown once), then revoked.
        await page.goto(f"{dash.base_url}/dashboard/webhooks")
        await tab_to(page, "button:has-text('Create a signing secret')")
        await page.keyboard.press("Enter")
        await expect(page.locator("#new-secret-value")).to_contain_text("whsec_")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-webhooks-desktop.png", full_page=True)
        await tab_to(page, "#secrets button:has-text('Revoke')")
        await page.keyboard.press("Enter")
        await expect(page.locator("#secrets")).to_contain_text("revoked")

        await page.goto(f"{dash.base_url}/dashboard/settings")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-settings-desktop.png", full_page=True)
    finally:
        await context.close()


async def test_a_request_without_the_csrf_token_is_refused_in_the_browser(
    browser: Browser, dash: RunningApp
) -> None:
    owner = Account.create().address
    context = await wallet_context(browser, None)
    page = await context.new_page()
    try:
        await signed_in_by_link(dash, page, owner)
        status = await page.evaluate(
            """async () => (await fetch('/dashboard/api-keys', {method: 'POST',
              headers: {'content-type': 'application/x-www-form-urlencoded'},
              body: 'label=sneaky'})).status"""
        )
        await page.goto(f"{dash.base_url}/dashboard/api-keys")
        await expect(page.locator("#keys")).to_contain_text("Nothing here yet.")
    finally:
        await context.close()
    assert status == 403


async def test_the_brand_set_in_the_dashboard_shows_on_the_payment_page(
    browser: Browser, dash: RunningApp, dev: DevDeployment, artifacts: Path
) -> None:
    owner = Account.create().address
    context = await wallet_context(browser, None)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        await signed_in_by_link(dash, page, owner)
        await page.click("nav >> text=Brand")
        await expect(page.locator("#accent-preview")).to_have_text("The payment page's own colours")

        # A refused file (SVG): the service's message under the field, nothing saved.
        await page.fill("#brand-name", "Café Olé")
        await page.set_input_files(
            "#brand-logo",
            files=[{"name": "logo.svg", "mimeType": "image/svg+xml", "buffer": b"<svg/>"}],
        )
        await page.click("#brand-form button[type=submit]")
        await expect(page.locator("#brand-logo-error")).to_have_text(
            "logo must be a PNG, JPEG or WebP image"
        )
        await expect(page.locator("main .error")).to_contain_text("(invalid_request)")
        await expect(page.locator("#brand-current")).to_contain_text("none")
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-brand-error-desktop.png", full_page=True)

        # A file too large to send is refused in the browser, with the service's message.
        big = {"name": "big.png", "mimeType": "image/png", "buffer": bytes(600 * 1024)}
        await page.set_input_files("#brand-logo", files=[big])
        await page.click("#brand-form button[type=submit]")
        await expect(page.locator("#brand-form [data-status]")).to_have_text(
            "logo must be at most 128 KiB"
        )

        # Name, colour from the picker's text field, and a PNG logo.
        await page.fill("#brand-name", "Café Olé")
        await page.fill("#brand-accent", "#1A3D6B")
        await page.set_input_files(
            "#brand-logo",
            files=[
                {
                    "name": "logo.png",
                    "mimeType": "image/png",
                    "buffer": logo_png((250, 210, 0, 255)),
                }
            ],
        )
        await page.click("#brand-form button[type=submit]")
        await expect(page.locator(".notice")).to_have_text("Brand saved")
        await expect(page.locator("#accent-preview")).to_contain_text("#1a3d6b, text white")
        assert await page.input_value("#brand-accent-picker") == "#1a3d6b"
        await page.wait_for_function(
            "() => { const i = document.getElementById('brand-current-logo');"
            " return i.complete && i.naturalWidth > 0; }"
        )
        await no_serious_axe(page)
        await page.screenshot(path=artifacts / "dashboard-brand-desktop.png", full_page=True)
        await page.set_viewport_size(PHONE)
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await page.screenshot(path=artifacts / "dashboard-brand-phone.png", full_page=True)
        await page.set_viewport_size(DESKTOP)

        # An invoice from the dashboard: its payment page wears the brand.
        await page.click("nav >> text=Create")
        await page.select_option("#c-asset", f"{dev.chain_id}:native")
        await page.fill("#c-amount", "0.5")
        await page.press("#c-amount", "Enter")
        hosted = await page.locator("#hosted-url").get_attribute("href")
        assert hosted is not None
        await page.goto(dash.base_url + "/pay/" + hosted.rsplit("/", 1)[1])
        await page.wait_for_function(
            "() => { const i = document.getElementById('brand-logo');"
            " return i.complete && i.naturalWidth > 0; }"
        )
        await expect(page.locator("#brand-name")).to_have_text("Café Olé")
        band = await page.evaluate(
            "() => { const s = getComputedStyle(document.getElementById('brand'));"
            " return [s.backgroundColor, s.color]; }"
        )
        assert band == ["rgb(26, 61, 107)", "rgb(255, 255, 255)"]
        await page.screenshot(path=artifacts / "dashboard-brand-pay-desktop.png", full_page=True)
    finally:
        await context.close()
    assert errors == []
