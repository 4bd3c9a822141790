"""The brand from the dashboard over real HTTP: the form sets what the settings API reads
back and the payment page shows; every refused input is shown in the form with the API's
message and code, and changes nothing; no session or a wrong CSRF token is refused."""

from __future__ import annotations

import base64
import contextlib
import io
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from PIL import Image

from invoicing.brand.logo import MAX_LOGO_BYTES
from invoicing.chain.deploy import DevDeployment
from invoicing.web.dashboard.brand_page import BRAND_FORM_MAX_BYTES
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><script>1</script></svg>'


@pytest.fixture
async def dash(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    async with dashboard_app(make_services) as app:
        yield app


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png(size: tuple[int, int] = (64, 32)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (26, 107, 60)).save(out, format="PNG")
    return out.getvalue()


class Shop:
    """A signed-in dashboard client and the API's view of the same owner's brand."""

    def __init__(self, app: RunningApp, client: httpx.AsyncClient, address: str, key: str):
        self.app, self.client, self.address, self.key = app, client, address, key

    async def brand(self) -> dict[str, Any]:
        answer = await self.app.http.get(
            "/integration/settings/brand",
            params={"ownerAddress": self.address},
            headers=key_headers(self.key),
        )
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found

    async def save(self, **fields: str) -> httpx.Response:
        csrf = csrf_of((await self.client.get("/dashboard/brand")).text)
        return await self.client.post("/dashboard/brand", data={"csrf": csrf, **fields})


@contextlib.asynccontextmanager
async def shop_of(app: RunningApp, chain_id: int) -> AsyncIterator[Shop]:
    owner = new_owner()
    async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
        assert (await sign_in(client, owner, chain_id)).status_code == 200
        yield Shop(app, client, owner.address, await issue_api_key(app.services, owner))


async def test_the_form_sets_the_apis_brand_and_the_payment_page_shows_it(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with shop_of(dash, dev.chain_id) as shop:
        saved = await shop.save(displayName="  Café Olé ", accentColor="#FFD400", logo=b64(png()))
        page = await shop.client.get("/dashboard/brand")
        brand = await shop.brand()
        sha = brand["logoUrl"].rsplit("/", 1)[1].removesuffix(".png")
        created = await dash.http.post(
            "/integration/invoices",
            json={"ownerAddress": shop.address, "chainId": dev.chain_id, "amount": "1"},
            headers=key_headers(shop.key),
        )
        pay = await dash.http.get(f"/pay/{created.json()['paymentAddress']}")
        # Empty fields remove the name and colour; an unchosen file keeps the logo.
        cleared = await shop.save(displayName="", accentColor="", logo="")
        after_clear = await shop.brand()
        removed = await shop.client.post(
            "/dashboard/brand/remove-logo", data={"csrf": csrf_of(page.text)}
        )
        after_remove = await shop.brand()

    assert saved.status_code == 303
    assert saved.headers["location"] == "/dashboard/brand?notice=Brand+saved"
    assert brand == {
        "displayName": "Café Olé",
        "accentColor": "#ffd400",
        "textColor": "#000000",
        "logoUrl": f"http://pay.test/pay/brand/{sha}.png",
    }
    assert page.status_code == 200
    assert f'<img id="brand-current-logo" class="logo" src="/pay/brand/{sha}.png"' in page.text
    assert 'aria-label="black text on #ffd400"' in page.text
    assert "#ffd400, text black (14.7:1)" in page.text
    assert 'value="Café Olé"' in page.text and 'value="#ffd400"' in page.text
    assert "Café Olé" in pay.text
    assert "/pay/brand/theme-ffd400-000000.css" in pay.text
    assert f"/pay/brand/{sha}.png" in pay.text
    assert cleared.status_code == 303
    assert after_clear == {
        "displayName": None,
        "accentColor": None,
        "textColor": None,
        "logoUrl": brand["logoUrl"],
    }
    assert removed.status_code == 303
    assert removed.headers["location"] == "/dashboard/brand?notice=Logo+removed"
    assert after_remove["logoUrl"] is None


BAD_INPUTS = [
    pytest.param(
        {"logo": b64(b"\x89PNG" + bytes(MAX_LOGO_BYTES))},
        "logo",
        "logo must be at most 128 KiB",
        id="oversized-logo",
    ),
    pytest.param(
        {"logo": b64(SVG)}, "logo", "logo must be a PNG, JPEG or WebP image", id="svg-logo"
    ),
    pytest.param({"logo": "not base64!"}, "logo", "logo must be base64", id="not-base64"),
    pytest.param(
        {"accentColor": "red"},
        "accentColor",
        "accentColor must be # and six hex digits, like #1a6b3c",
        id="bad-colour",
    ),
    pytest.param(
        {"displayName": "x" * 65},
        "displayName",
        "displayName must be 1 to 64 characters",
        id="too-long-name",
    ),
    pytest.param(
        {"displayName": "Shop\u202e"},
        "displayName",
        "displayName must not contain control or invisible characters",
        id="invisible-character",
    ),
]
FIELD_IDS = {"displayName": "brand-name", "accentColor": "brand-accent", "logo": "brand-logo"}


@pytest.mark.parametrize(("fields", "field", "message"), BAD_INPUTS)
async def test_a_refused_input_is_shown_in_the_form_and_changes_nothing(
    dash: RunningApp, dev: DevDeployment, fields: dict[str, str], field: str, message: str
) -> None:
    async with shop_of(dash, dev.chain_id) as shop:
        first = await shop.save(displayName="Before", accentColor="#1a6b3c", logo=b64(png()))
        before = await shop.brand()
        # Every field sent, as the form sends them: the good ones are not saved either.
        answer = await shop.save(
            **{"displayName": "After", "accentColor": "#000000", "logo": b64(png((8, 8)))} | fields
        )
        after = await shop.brand()

    assert first.status_code == 303
    assert answer.status_code == 400
    assert f"Nothing was saved: {message} (invalid_request)" in answer.text
    field_id = FIELD_IDS[field]
    assert f'<p class="field-error" id="{field_id}-error">{message}</p>' in answer.text
    assert re.search(f'id="{field_id}" aria-describedby="[^"]+" aria-invalid="true"', answer.text)
    assert answer.text.count('aria-invalid="true"') == 1
    assert after == before


async def test_without_a_session_or_the_csrf_token_nothing_changes(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with shop_of(dash, dev.chain_id) as shop:
        csrf = csrf_of((await shop.client.get("/dashboard/brand")).text)
        form = {"displayName": "Sneaky", "accentColor": "#ff0000"}
        no_token = await shop.client.post("/dashboard/brand", data=form)
        wrong = await shop.client.post("/dashboard/brand", data={"csrf": csrf + "x", **form})
        cross_site = await shop.client.post(
            "/dashboard/brand",
            data={"csrf": csrf, **form},
            headers={"origin": "https://evil.example"},
        )
        no_remove = await shop.client.post("/dashboard/brand/remove-logo", data={})
        async with httpx.AsyncClient(base_url=dash.base_url, timeout=30) as stranger:
            no_session = await stranger.post("/dashboard/brand", data={"csrf": csrf, **form})
            page = await stranger.get("/dashboard/brand")
        too_large = await shop.client.post(
            "/dashboard/brand",
            data={"csrf": csrf, "logo": "A" * BRAND_FORM_MAX_BYTES, **form},
        )
        brand = await shop.brand()

    assert [no_token.status_code, wrong.status_code, cross_site.status_code] == [403, 403, 403]
    assert no_token.json()["error"]["code"] == "forbidden"
    assert no_remove.status_code == 403
    assert no_session.status_code == 401
    assert (page.status_code, page.headers["location"]) == (303, "/dashboard/login")
    assert too_large.status_code == 413
    assert too_large.json()["error"]["code"] == "payload_too_large"
    assert brand == {"displayName": None, "accentColor": None, "textColor": None, "logoUrl": None}
