"""The dashboard's subscriptions in headless Chromium: the list, one subscription with its
charge (period 0, charged at the payer's authorization on anvil), its webhook URL, and its
cancellation; axe-core on each page, screenshots at desktop and phone width
(test-artifacts/)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from invoicing.auth.sign_in import issue_link
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.payments.subscriptions.service import find_subscription
from tests.browser.conftest import axe_violations
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import dashboard_app
from tests.support.subscriptions import authorized, subscribed
from tests.support.withdrawals import settle_all

pytestmark = pytest.mark.browser

WEBHOOK_URL = "https://hooks.example.com/paid?plan=gold&from=subscriptions"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}


@pytest.fixture
async def dash(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    async with dashboard_app(make_services) as app:
        yield app


async def signed_in(app: RunningApp, page: Page, owner: str) -> None:
    token = await issue_link(app.services.db, owner, int(time.time() * 1000), 60_000)
    await page.goto(f"{app.base_url}/dashboard/login/link/{token}")
    await expect(page.locator("h1")).to_have_text("Overview")


def _body(owner: str, dev: DevDeployment) -> dict[str, object]:
    return {
        "ownerAddress": owner,
        "chainId": dev.chain_id,
        "tokenAddress": dev.token,
        "amount": "1",
        "periodSeconds": 3600,
    }


async def test_the_list_a_subscription_its_charge_and_its_cancellation(
    browser: Browser, dash: RunningApp, dev: DevDeployment, evm: EvmClient, artifacts: Path
) -> None:
    owner, headers, payer, created = await subscribed(
        dash,
        evm,
        dev,
        subscriptionId="plan-<b>gold</b>",
        periodSeconds=3600,
        webhookUrl=WEBHOOK_URL,
    )
    await authorized(dash, payer, created)
    await settle_all(dash.services)
    pk = created["id"]
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = await browser.new_context(viewport=viewport)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error, seen=errors: seen.append(str(error)))
        try:
            await signed_in(dash, page, owner.address)
            await page.click('nav a[href="/dashboard/subscriptions"]')
            await expect(page.locator("h1")).to_have_text("Subscriptions")
            row = page.locator("#subscriptions tr")
            await expect(row).to_have_count(1)
            # The owner's reference is text, never markup.
            await expect(row.locator("a")).to_have_text("plan-<b>gold</b>")
            await expect(row.locator("td").nth(1)).to_have_text("active")
            await expect(row.locator("td").nth(2)).to_have_text("2.5 TUSD")
            await expect(row.locator("td").nth(3)).to_have_text("1 hour")
            await expect(row.locator("td").nth(6)).to_have_text("1")
            assert await axe_violations(page) == [], page.url
            await page.screenshot(
                path=artifacts / f"dashboard-subscriptions-{name}.png", full_page=True
            )

            await row.locator("a").click()
            await expect(page.locator("h1")).to_have_text("Subscription plan-<b>gold</b>")
            charge = page.locator("#charges tr")
            await expect(charge).to_have_count(1)
            await expect(charge.locator("td").nth(0)).to_have_text("0")
            await expect(charge.locator("td").nth(3)).to_have_text("charged")
            assert (await find_subscription(dash.services.db, pk)).payer == payer.address
            await expect(page.locator("dl.facts")).to_contain_text(payer.address)
            await expect(page.locator("#webhook-url")).to_have_text(WEBHOOK_URL)
            assert await axe_violations(page) == [], page.url
            await page.screenshot(
                path=artifacts / f"dashboard-subscription-{name}.png", full_page=True
            )
            assert errors == []
        finally:
            await context.close()

    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    try:
        await signed_in(dash, page, owner.address)
        await page.goto(f"{dash.base_url}/dashboard/subscriptions/{pk}")
        await page.click("#cancel-subscription button")
        await expect(page.locator("p.notice")).to_have_text("Subscription cancelled")
        await expect(page.locator("dl.facts dd").first).to_have_text("cancelled")
        await expect(page.locator("#cancel-subscription")).to_have_count(0)
        assert (await find_subscription(dash.services.db, pk)).status == "cancelled"
        assert await axe_violations(page) == [], page.url

        # One without a webhook URL says so.
        body = {**_body(owner.address, dev), "subscriptionId": "plan-silver"}
        plain = await dash.http.post("/integration/subscriptions", json=body, headers=headers)
        assert plain.status_code == 201, plain.text
        await page.goto(f"{dash.base_url}/dashboard/subscriptions/{plain.json()['id']}")
        await expect(page.locator("#webhook-url")).to_have_text(
            "none: no paid webhook (its events still reach your endpoints)"
        )

        unknown = await page.goto(f"{dash.base_url}/dashboard/subscriptions/no-such-id")
        assert unknown is not None and unknown.status == 404
        assert await axe_violations(page) == [], page.url
    finally:
        await context.close()
