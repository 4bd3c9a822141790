"""The merchant's brand on the payment page, in Chromium: logo, name and accent colour under
the page's CSP (every request to the service's own origin, nothing blocked), text on the
accent with AA contrast, axe-core clean, in a left-to-right and the right-to-left language,
at desktop and phone width (screenshots in test-artifacts/)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from tests.browser.conftest import axe_violations, logo_png
from tests.conftest import RunningApp
from tests.support.api import key_headers
from tests.support.payment_page import (
    CONTRAST_JS,
    DESKTOP,
    FLIP_TIMEOUT_MS,
    PAYER,
    PHONE,
    create,
)

pytestmark = pytest.mark.browser

WHITE = (250, 250, 250, 255)


@pytest.mark.parametrize(("accent", "text"), [("#ffd400", "#000000"), ("#1a3d6b", "#ffffff")])
async def test_branded_page_keeps_its_csp_contrast_and_axe_in_ltr_and_rtl(
    browser: Browser,
    page_app: RunningApp,
    dev: DevDeployment,
    evm: EvmClient,
    artifacts: Path,
    accent: str,
    text: str,
) -> None:
    invoice = await create(
        page_app, dev, amount="25", tokenAddress=dev.token, description="Order #88",
        redirectUrl=f"{page_app.base_url}/healthz",
    )  # fmt: skip
    brand = await page_app.http.put(
        "/integration/settings/brand",
        json={"ownerAddress": invoice["ownerAddress"], "displayName": "Café Olé",
              "accentColor": accent, "logo": base64.b64encode(logo_png(WHITE)).decode()},
        headers=key_headers(invoice["_key"]),
    )  # fmt: skip
    assert brand.status_code == 200 and brand.json()["textColor"] == text
    escrow = invoice["paymentAddress"]
    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 5_000_000))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for lang in ("en", "ar", "ja"):
        for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            context = await browser.new_context(viewport=viewport)
            try:
                page = await context.new_page()
                requests: list[str] = []
                console: list[str] = []
                page.on("request", lambda request, seen=requests: seen.append(request.url))
                page.on("console", lambda message, seen=console: seen.append(message.text))
                await page.goto(f"{page_app.base_url}/pay/{escrow}?lang={lang}")
                await page.wait_for_function(
                    "() => { const i = document.getElementById('brand-logo');"
                    " return i.complete && i.naturalWidth > 0; }",
                    timeout=FLIP_TIMEOUT_MS,
                )
                found[(lang, size)] = {
                    "band": await page.evaluate(
                        "() => { const s = getComputedStyle(document.getElementById('brand'));"
                        " return [s.backgroundColor, s.color]; }"
                    ),
                    "button": await page.evaluate(
                        "() => getComputedStyle(document.getElementById('wallet')).backgroundColor"
                    ),
                    "contrast": await page.evaluate(CONTRAST_JS),
                    "violations": await axe_violations(page),
                    "requests": requests,
                    "console": console,
                    "overflow": await page.evaluate(
                        "document.documentElement.scrollWidth - innerWidth"
                    ),
                }
                await page.screenshot(
                    path=artifacts / f"pay-brand-{accent[1:]}-{lang}-{size}.png", full_page=True
                )
            finally:
                await context.close()

    rgb = "rgb({}, {}, {})".format(*(int(accent[i : i + 2], 16) for i in (1, 3, 5)))
    text_rgb = "rgb(0, 0, 0)" if text == "#000000" else "rgb(255, 255, 255)"
    for key, facts in found.items():
        assert facts["band"] == [rgb, text_rgb], key
        assert facts["violations"] == [], key
        assert [ratio for _, ratio in facts["contrast"] if ratio < 4.5] == [], key
        assert all(r.startswith(page_app.base_url + "/") for r in facts["requests"]), key
        assert not [m for m in facts["console"] if "Content Security Policy" in m], key
        assert facts["overflow"] == 0, key
