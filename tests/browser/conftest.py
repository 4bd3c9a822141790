"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright, and the real app.

We never run ``playwright install``: the browser comes from ``scripts/install-browser-deps.sh``,
which ``make test`` runs when the machine allows it (root or password-less sudo).
Without it the browser tests skip locally and fail in CI (``CI=true``).
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw
from playwright.async_api import Browser, Page, async_playwright, expect

from invoicing.web.app import create_app
from tests.conftest import TEST_DATABASE, MakeServices, RunningApp
from tests.support.server import serve

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# A page's text often waits on a chain transaction or a worker pass (a relayed transfer, a
# refund, a test ping). Playwright's default of 5 s is too short for those when both test
# suites share the machine's two cores, so every expectation gets 20 s; one that is met
# returns as soon as it is.
expect.set_options(timeout=20_000)


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: run scripts/install-browser-deps.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium_path: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=str(chromium_path), args=CHROMIUM_ARGS
        )
        yield chromium
        await chromium.close()


@pytest.fixture
async def page_app(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    """The real app; the status route may re-check the chain every 0.5 s (flips fast)."""
    services = await make_services(page_recheck_interval_s=0.5)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Screenshots for a reader, one folder per database kind (CI runs both suites at once)."""
    folder = ARTIFACTS / ("sqlite" if TEST_DATABASE == "sqlite" else "postgresql")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# axe-core from npm (@axe-core/playwright's axe-core, package-lock.json): evaluated through
# the DevTools protocol, which the page's CSP does not govern, so the page keeps its policy.
AXE_SOURCE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


async def axe_violations(
    page: Page, impacts: tuple[str, ...] = ("serious", "critical")
) -> list[str]:
    """axe-core's violations of the given impacts, as ``rule: selectors`` lines."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE_SOURCE.read_text("utf-8"))
    result = await page.evaluate(
        "(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}})", AXE_TAGS
    )
    return [
        f"{v['id']} ({v['impact']}): {[node['target'] for node in v['nodes']]}"
        for v in result["violations"]
        if v["impact"] in impacts
    ]


def logo_png(fill: tuple[int, int, int, int]) -> bytes:
    """A 240x96 PNG logo: a circle of ``fill`` and a dark bar, on a transparent ground."""
    image = Image.new("RGBA", (240, 96), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.ellipse((4, 4, 92, 92), fill=fill, outline=(20, 20, 20, 255), width=6)
    draw.rectangle((110, 30, 230, 66), fill=(20, 20, 20, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
