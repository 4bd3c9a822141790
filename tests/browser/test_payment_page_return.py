"""Back to the shop, in Chromium: a payer pays with the keyboard alone, the page counts down
to the shop's redirectUrl (announced once), the payer can stop it from the keyboard, and a
page left alone goes there, unless the invoice was paid more than ten minutes ago: then only
the link is there. cancelUrl is the way out before paying."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect
from sqlalchemy import update

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.invoices import Invoice
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.payment_page import (
    DESKTOP,
    FLIP_TIMEOUT_MS,
    PAYER,
    PHONE,
    WALLET_JS,
    InjectedWallet,
    create,
    create_expired,
    funded_payer,
)

pytestmark = pytest.mark.browser


async def tab_to(page: Page, element_id: str, limit: int = 30) -> list[str]:
    """Press Tab until ``element_id`` has the focus; the ids passed on the way."""
    passed = []
    for _ in range(limit):
        await page.keyboard.press("Tab")
        focused = await page.evaluate("document.activeElement && document.activeElement.id")
        passed.append(focused)
        if focused == element_id:
            return passed
    raise AssertionError(f"#{element_id} never took the focus; passed {passed}")


async def test_keyboard_payment_then_the_countdown_is_announced_and_stopped_from_the_keyboard(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    shop = f"{page_app.base_url}/healthz"
    invoice = await create(
        page_app, dev, amount="0.3", redirectUrl=f"{shop}?paid=1", cancelUrl=f"{shop}?cart=1"
    )
    escrow = invoice["paymentAddress"]
    wallet = InjectedWallet(evm, await funded_payer(evm, dev))
    context = await browser.new_context(viewport=PHONE)
    try:
        page = await context.new_page()
        await page.clock.install()  # runs as a real clock until told to run ahead
        await page.expose_function("__walletRpc", wallet.handle)
        await page.add_init_script(WALLET_JS)
        await page.goto(f"{page_app.base_url}/pay/{escrow}")

        before = await tab_to(page, "wallet")
        cancel_href = await page.locator("#cancel-link").get_attribute("href")
        await page.keyboard.press("Enter")
        await expect(page.locator("#status")).to_have_text(
            "Payment received", timeout=FLIP_TIMEOUT_MS
        )
        await expect(page.locator("#return-timer")).to_be_visible()
        announced = await page.locator("#return-announce").inner_text()
        first_count = await page.locator("#return-countdown").inner_text()
        running_violations = await axe_violations(page)
        after = await tab_to(page, "return-stop")
        await page.keyboard.press("Enter")
        stopped = await page.locator("#return-announce").inner_text()
        focused = await page.evaluate("document.activeElement.id")
        timer_visible = await page.locator("#return-timer").is_visible()
        link = await page.locator("#return-link").get_attribute("href")
        # Longer than the countdown, run at once on the page's clock: nothing happens.
        clock_before = await page.evaluate("Date.now()")
        await page.clock.run_for(11_000)
        clock_ran = await page.evaluate("Date.now()") - clock_before
        url_after = page.url
        stopped_violations = await axe_violations(page)
    finally:
        await context.close()

    assert "copy" in before and before[-1] == "wallet"
    assert cancel_href == f"{shop}?cart=1"
    assert wallet.sent != []
    assert announced == "Returning to 127.0.0.1 in 10 seconds."
    assert first_count.startswith("Returning to 127.0.0.1 in ")
    assert after[-2:] == ["return-link", "return-stop"]
    assert stopped == "Automatic return stopped. Use the link when you are ready."
    assert (focused, timer_visible, link) == ("return-link", False, f"{shop}?paid=1")
    assert clock_ran >= 11_000 and url_after == f"{page_app.base_url}/pay/{escrow}"
    assert running_violations == [] and stopped_violations == []


async def test_a_paid_page_left_alone_goes_back_to_the_shop_after_the_countdown(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    shop = f"{page_app.base_url}/healthz?order=17"
    invoice = await create(page_app, dev, amount="1", tokenAddress=dev.token, redirectUrl=shop)
    escrow = invoice["paymentAddress"]
    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 1_000_000))
    for _ in range(100):
        status: dict[str, Any] = (await page_app.http.get(f"/pay/{escrow}/status")).json()
        if status["status"] == "paid":
            break
        await asyncio.sleep(0.2)
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.clock.install()
        await page.goto(f"{page_app.base_url}/pay/{escrow}?lang=de")
        countdown = await page.locator("#return-countdown").inner_text()
        link = await page.locator("#return-link").inner_text()
        await page.clock.run_for(10_000)  # the countdown, at once
        await page.wait_for_url(shop, timeout=5_000)
        body = await page.locator("body").inner_text()
    finally:
        await context.close()

    # 10 s from the page's load; a loaded machine may take seconds before it is read
    counted = re.fullmatch(r"Zurück zu 127\.0\.0\.1 in (\d+) Sekunden\.", countdown)
    assert counted is not None and 2 <= int(counted[1]) <= 10, countdown
    assert link == "Zurück zu 127.0.0.1"
    assert '"status"' in body  # the shop's page (here /healthz) is what the browser shows


async def test_a_page_paid_eleven_minutes_ago_shows_the_link_and_stays(
    browser: Browser, page_app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    shop = f"{page_app.base_url}/healthz?order=18"
    invoice = await create(page_app, dev, amount="0.001", redirectUrl=shop)
    escrow = invoice["paymentAddress"]
    await evm.transact(PAYER, escrow, value=10**15)
    for _ in range(100):
        status: dict[str, Any] = (await page_app.http.get(f"/pay/{escrow}/status")).json()
        if status["status"] == "paid":
            break
        await asyncio.sleep(0.2)
    async with page_app.services.db.transaction() as session:
        await session.execute(
            update(Invoice)
            .where(Invoice.payment_address == escrow)
            .values(paid_at=status["paidAt"] - 660_000)
        )
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.clock.install()
        await page.goto(f"{page_app.base_url}/pay/{escrow}")
        timer_at_load = await page.locator("#return-timer").is_visible()
        # A poll of the paid page (every 5 s) reads paidAt, then longer than the countdown.
        async with page.expect_response(lambda r: r.url.endswith("/status")):
            await page.clock.run_for(5_500)
        await page.clock.run_for(11_000)
        timer_after = await page.locator("#return-timer").is_visible()
        link = await page.locator("#return-link").get_attribute("href")
        link_visible = await page.locator("#return-link").is_visible()
        url_after = page.url
    finally:
        await context.close()

    assert (timer_at_load, timer_after) == (False, False)
    assert (link, link_visible) == (shop, True)
    assert url_after == f"{page_app.base_url}/pay/{escrow}"


async def test_an_expired_invoice_offers_the_cancel_link_and_never_counts_down(
    browser: Browser, page_app: RunningApp, dev: DevDeployment
) -> None:
    shop = f"{page_app.base_url}/healthz"
    invoice = await create_expired(
        page_app, dev, redirectUrl=f"{shop}?paid=1", cancelUrl=f"{shop}?cart=1"
    )
    context = await browser.new_context(viewport=PHONE)
    try:
        page = await context.new_page()
        await page.goto(f"{page_app.base_url}/pay/{invoice['paymentAddress']}?lang=ar")
        href = await page.locator("#return-link").get_attribute("href")
        text = await page.locator("#return-link").inner_text()
        timer_visible = await page.locator("#return-timer").is_visible()
        violations = await axe_violations(page)
    finally:
        await context.close()

    assert href == f"{shop}?cart=1"
    assert text == "العودة إلى 127.0.0.1"
    assert timer_visible is False
    assert violations == []
