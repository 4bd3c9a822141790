"""The refund claim page in Chromium, in every language, at desktop and phone width: the
catalogue's words, no horizontal scrolling, no serious or critical axe-core violation, before
and after a bad address and once saved. Screenshots go to test-artifacts/ for a reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser

from invoicing.chain.evm import EvmClient
from invoicing.refunds.claims import create_claim
from invoicing.web.page.i18n import LANGUAGES, PageLocale
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.payment_page import DESKTOP, PHONE
from tests.support.refund_claims import claim_row
from tests.support.signing import new_owner
from tests.support.withdrawals import paid_invoice

pytestmark = pytest.mark.browser


async def test_the_claim_page_reads_well_in_every_language(
    page_app: RunningApp, browser: Browser, evm: EvmClient, artifacts: Path
) -> None:
    services = page_app.services
    owner, payer = new_owner(), new_owner()
    invoice = await paid_invoice(services, evm, owner.address, "0.01")
    token = await create_claim(services.db, invoice, services.clock.now_ms())
    url = f"{page_app.base_url}/refund-claim/{token}"
    problems: dict[str, object] = {}
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = await browser.new_context(viewport=viewport)
        try:
            page = await context.new_page()
            for language in LANGUAGES:
                _ = PageLocale(language).gettext.gettext
                await page.goto(f"{url}?lang={language.code}")
                heading = await page.locator("h1").inner_text()
                assert heading == _("Refund address")
                key = f"{language.code}-{name}"
                overflow = await page.evaluate("document.documentElement.scrollWidth - innerWidth")
                if overflow > 0:
                    problems[f"{key} overflow"] = overflow
                if violations := await axe_violations(page):
                    problems[key] = violations
                await page.screenshot(path=artifacts / f"refund-claim-{key}.png", full_page=True)
            await page.goto(f"{url}?lang=en")
            await page.fill("#claim-address", payer.address[:-1] + "z")
            await page.click("#claim-save")
            await page.wait_for_selector("#claim-error")
            if violations := await axe_violations(page):
                problems[f"error-{name}"] = violations
            await page.screenshot(path=artifacts / f"refund-claim-error-{name}.png", full_page=True)
            await page.fill("#claim-address", payer.address)
            await page.click("#claim-save")
            await page.wait_for_selector("#claim-state")
            if violations := await axe_violations(page):
                problems[f"saved-{name}"] = violations
            await page.screenshot(path=artifacts / f"refund-claim-saved-{name}.png", full_page=True)
        finally:
            await context.close()
    assert problems == {}
    row = await claim_row(services, invoice.id)
    assert row is not None and row.address == payer.address
