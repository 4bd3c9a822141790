"""The payment page in every language and every state, in Chromium: the catalogue's words,
Babel's numbers, right to left for Arabic, no horizontal scrolling at phone width, and no
serious or critical axe-core violation. Screenshots of each language, desktop and phone,
go to test-artifacts/ for a reader."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.web.page.i18n import LANGUAGES, Language, PageLocale
from invoicing.web.page.texts import done_texts, status_labels
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.api import key_headers
from tests.support.payment_page import (
    DESKTOP,
    FLIP_TIMEOUT_MS,
    PAYER,
    PHONE,
    create,
    create_expired,
)

pytestmark = pytest.mark.browser

STATES = ("pending", "partially-paid", "paid", "expired", "cancelled")
SHOWN_STATUS = {"partially-paid": "pending"}


async def wait_for_status(app: RunningApp, escrow: str, done: Any) -> dict[str, Any]:
    deadline = time.monotonic() + FLIP_TIMEOUT_MS / 1000
    while True:
        status: dict[str, Any] = (await app.http.get(f"/pay/{escrow}/status")).json()
        if done(status) or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.3)


async def invoice_in_state(app: RunningApp, dev: DevDeployment, evm: EvmClient, state: str) -> str:
    """An invoice in one of the states the payer can see; its paymentAddress."""
    common: dict[str, Any] = {"tokenAddress": dev.token, "description": "Order #1001: 2 mugs"}
    if state == "expired":
        invoice = await create_expired(app, dev, amount="3")
    elif state == "cancelled":
        invoice = await create(app, dev, amount="4", invoiceId="gone-1", **common)
        deleted = await app.http.delete(
            "/integration/invoices",
            params={
                "ownerAddress": invoice["ownerAddress"],
                "chainId": dev.chain_id,
                "invoiceId": "gone-1",
            },
            headers=key_headers(invoice["_key"]),
        )
        assert deleted.status_code == 200, deleted.text
    else:
        invoice = await create(app, dev, amount="2000.5", **common)
        raw = {"pending": 0, "partially-paid": 250_000, "paid": 2_000_500_000}[state]
        if raw:
            await evm.transact(
                PAYER,
                dev.token,
                encode_call(TEST_TOKEN, "transfer", invoice["paymentAddress"], raw),
            )
    escrow: str = invoice["paymentAddress"]
    status = SHOWN_STATUS.get(state, state)
    seen = await wait_for_status(
        app,
        escrow,
        lambda s: s["status"] == status and (state != "partially-paid" or s["balanceRaw"] != "0"),
    )
    assert seen["status"] == status, (state, seen)
    return escrow


async def page_facts(page: Page) -> dict[str, Any]:
    facts: dict[str, Any] = await page.evaluate(
        """() => {
          const card = document.getElementById('payment').getBoundingClientRect();
          // the label's text itself (the dt box spans the card at phone width)
          const range = document.createRange();
          range.selectNodeContents(document.querySelector('.fact dt'));
          const dt = range.getBoundingClientRect();
          return {
            lang: document.documentElement.lang,
            dir: document.documentElement.dir,
            direction: getComputedStyle(document.getElementById('payment')).direction,
            labelNearStart: document.documentElement.dir === 'rtl'
              ? card.right - dt.right < dt.left - card.left
              : dt.left - card.left < card.right - dt.right,
            overflow: document.documentElement.scrollWidth - innerWidth,
            status: document.getElementById('status').innerText,
            done: document.getElementById('done-text').innerText,
            remaining: document.getElementById('remaining').innerText,
          };
        }"""
    )
    return facts


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("state", STATES)
async def test_every_language_reads_right_and_passes_axe(
    browser: Browser,
    page_app: RunningApp,
    dev: DevDeployment,
    evm: EvmClient,
    artifacts: Path,
    state: str,
) -> None:
    escrow = await invoice_in_state(page_app, dev, evm, state)
    sizes = (
        {"desktop": DESKTOP, "phone": PHONE}
        if state in ("pending", "paid")
        else {"desktop": DESKTOP}
    )
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    violations: dict[tuple[str, str], list[str]] = {}
    # One browser context a size: each language is a page load of its own (the payment page
    # keeps nothing in cookies or storage), without a new context's start-up each time.
    for size, viewport in sizes.items():
        context = await browser.new_context(viewport=viewport)
        try:
            page = await context.new_page()
            for language in LANGUAGES:
                await page.goto(f"{page_app.base_url}/pay/{escrow}?lang={language.code}")
                await page.wait_for_function("() => document.getElementById('qr').complete")
                key = (language.code, size)
                seen[key] = await page_facts(page)
                violations[key] = await axe_violations(page)
                await page.screenshot(
                    path=artifacts / f"pay-{language.code}-{state}-{size}.png", full_page=True
                )
        finally:
            await context.close()

    assert {key: found for key, found in violations.items() if found} == {}
    status = SHOWN_STATUS.get(state, state)
    for (code, size), facts in seen.items():
        language = next(lang for lang in LANGUAGES if lang.code == code)
        locale = PageLocale(language)
        assert facts["lang"] == code
        assert facts["dir"] == facts["direction"] == ("rtl" if language.rtl else "ltr")
        assert facts["labelNearStart"] is True, (code, size)
        assert facts["overflow"] == 0, (code, size)
        label = "partial" if state == "partially-paid" else status  # "Partly paid"
        assert facts["status"] == status_labels(locale)[label], code
        assert facts["done"] == (done_texts(locale).get(status, "") if status != "pending" else "")
        if state == "partially-paid":
            assert facts["remaining"] == locale.amount("2000.25")


@pytest.mark.parametrize(
    ("browser_locale", "language"), [("de-DE", LANGUAGES[4]), ("ar-EG", LANGUAGES[7])]
)
async def test_language_follows_the_browser_and_live_updates_write_its_numbers(
    browser: Browser,
    page_app: RunningApp,
    dev: DevDeployment,
    evm: EvmClient,
    browser_locale: str,
    language: Language,
) -> None:
    invoice = await create(page_app, dev, amount="2000.5", tokenAddress=dev.token)
    escrow = invoice["paymentAddress"]
    locale = PageLocale(language)
    context = await browser.new_context(viewport=PHONE, locale=browser_locale)
    try:
        page = await context.new_page()
        await page.goto(f"{page_app.base_url}/pay/{escrow}")
        before = await page.locator("#remaining").inner_text()
        await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 250_000))
        await expect(page.locator("#remaining")).to_have_text(
            locale.amount("2000.25"), timeout=FLIP_TIMEOUT_MS
        )
        await evm.transact(
            PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 2_000_250_000)
        )
        await expect(page.locator("#status")).to_have_text(
            status_labels(locale)["paid"], timeout=FLIP_TIMEOUT_MS
        )
        done = await page.locator("#done-text").inner_text()
        lang = await page.evaluate("document.documentElement.lang")
    finally:
        await context.close()

    assert lang == language.code
    assert before == locale.amount("2000.5")
    assert done == done_texts(locale)["paid"]
