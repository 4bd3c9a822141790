"""The payment page's receipt field in headless Chromium: shown when the owner sends
receipts, the address sent by pay.js, the answer said in the page's language."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, expect
from sqlalchemy import select

from invoicing.chain.deploy import DevDeployment
from invoicing.tables.mail import ReceiptRequest
from tests.browser.conftest import axe_violations
from tests.conftest import RunningApp
from tests.support.api import key_headers
from tests.support.payment_page import DESKTOP, create

pytestmark = pytest.mark.browser


async def test_a_payer_leaves_an_address_for_the_receipt(
    browser: Browser, page_app: RunningApp, dev: DevDeployment
) -> None:
    invoice = await create(page_app, dev)
    mail = {
        "ownerAddress": invoice["ownerAddress"],
        "email": "owner@shop.example",
        "events": [],
        "receipts": True,
    }
    put = await page_app.http.put(
        "/integration/settings/notifications", json=mail, headers=key_headers(invoice["_key"])
    )
    assert put.status_code == 200, put.text
    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    try:
        await page.goto(f"{page_app.base_url}/pay/{invoice['paymentAddress']}?lang=de")
        await expect(page.locator("#receipt-form")).to_be_visible()
        violations = await axe_violations(page)
        await page.locator("#receipt-email").fill("payer@mail.example")
        await page.locator("#receipt-send").click()
        await expect(page.locator("#receipt-message")).to_have_text(
            "Ihr Beleg wird an payer@mail.example gesendet, sobald die Zahlung eingeht."
        )
    finally:
        await context.close()

    assert violations == []
    async with page_app.services.db.sessions() as session:
        stored = await session.scalar(
            select(ReceiptRequest).where(ReceiptRequest.email == "payer@mail.example")
        )
    assert stored is not None and (stored.language, stored.invoice_pk) == ("de", invoice["id"])
