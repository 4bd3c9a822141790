"""The merchant's brand over real HTTP: set through the settings API, served by the service
(the re-encoded logo and a colour stylesheet), shown on the payment page under its CSP; a
refused update (4xx) changes nothing."""

from __future__ import annotations

import asyncio
import base64
import io
import statistics
import time
from typing import Any

import httpx
import pytest
from PIL import Image

from invoicing.brand import logo as logos
from invoicing.brand import logo_process
from invoicing.chain.deploy import DevDeployment
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.hostile_images import many_scan_jpeg
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PATH = "/integration/settings/brand"
EMPTY = {"displayName": None, "accentColor": None, "textColor": None, "logoUrl": None}


def image_b64(fmt: str = "PNG", size: tuple[int, int] = (64, 32)) -> str:
    out = io.BytesIO()
    Image.new("RGB", size, (26, 107, 60)).save(out, format=fmt)
    return base64.b64encode(out.getvalue()).decode()


class Owner:
    def __init__(self, app: RunningApp, address: str, key: str) -> None:
        self.app, self.address, self.key = app, address, key

    async def put(self, **fields: Any) -> httpx.Response:
        body = {"ownerAddress": self.address, **fields}
        return await self.app.http.put(PATH, json=body, headers=key_headers(self.key))

    async def get(self) -> dict[str, Any]:
        response = await self.app.http.get(
            PATH, params={"ownerAddress": self.address}, headers=key_headers(self.key)
        )
        assert response.status_code == 200, response.text
        brand: dict[str, Any] = response.json()
        return brand


async def owner_of(app: RunningApp) -> Owner:
    owner = new_owner()
    return Owner(app, owner.address, await issue_api_key(app.services, owner))


async def test_brand_is_set_read_served_and_shown_on_the_page(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = await owner_of(app)
    before = await owner.get()
    changed = await owner.put(
        displayName="  Café Olé  ", accentColor="#1A6B3C", logo=image_b64("WEBP")
    )
    brand = await owner.get()
    logo = await app.http.get(brand["logoUrl"].removeprefix("http://pay.test"))
    created = await app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1",
              "redirectUrl": "https://shop.example/thanks"},
        headers=key_headers(owner.key),
    )  # fmt: skip
    page = await app.http.get(f"/pay/{created.json()['paymentAddress']}")
    theme = await app.http.get("/pay/brand/theme-1a6b3c-ffffff.css")

    assert before == EMPTY
    assert changed.status_code == 200 and changed.json() == brand
    sha = brand["logoUrl"].rsplit("/", 1)[1].removesuffix(".png")
    assert brand == {
        "displayName": "Café Olé",
        "accentColor": "#1a6b3c",
        "textColor": "#ffffff",
        "logoUrl": f"http://pay.test/pay/brand/{sha}.png",
    }
    assert logo.status_code == 200 and logo.headers["content-type"] == "image/png"
    assert logo.headers["x-content-type-options"] == "nosniff"
    assert "immutable" in logo.headers["cache-control"]
    with Image.open(io.BytesIO(logo.content)) as image:
        assert (image.format, image.size) == ("PNG", (64, 32))
    html = page.text
    assert '<link rel="stylesheet" href="/pay/brand/theme-1a6b3c-ffffff.css">' in html
    assert (
        f'<img class="brand-logo" id="brand-logo" src="/pay/brand/{sha}.png" height="48" alt="">'
        in html
    )
    assert '<p class="brand-name" id="brand-name">Café Olé</p>' in html
    assert "Return to Café Olé" in html  # the shop's name is the display name
    assert page.headers["content-security-policy"].startswith(
        "default-src 'none'; script-src 'self'"
    )
    assert "style=" not in html and "<script>" not in html  # no inline style or script
    assert theme.text == ":root { --accent: #1a6b3c; --accent-text: #ffffff; }\n"


async def test_a_field_left_out_stays_and_null_removes(app: RunningApp) -> None:
    owner = await owner_of(app)
    await owner.put(displayName="Shop", accentColor="#ffd400", logo=image_b64())
    after_colour = (await owner.put(accentColor="#123456")).json()
    after_removal = (await owner.put(displayName=None, logo=None)).json()

    assert after_colour["displayName"] == "Shop" and after_colour["logoUrl"] is not None
    assert (after_colour["accentColor"], after_colour["textColor"]) == ("#123456", "#ffffff")
    assert after_removal == {**EMPTY, "accentColor": "#123456", "textColor": "#ffffff"}


def svg_b64() -> str:
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    return base64.b64encode(svg).decode()


BAD_UPDATES = [
    ({"logo": svg_b64()}, "logo"),
    ({"logo": base64.b64encode(b"GIF89a" + b"\x00" * 40).decode()}, "logo"),
    ({"logo": base64.b64encode(b"just text").decode()}, "logo"),
    ({"logo": "not base64!"}, "logo"),
    ({"logo": base64.b64encode(b"\x89PNG" + b"\x00" * (128 * 1024)).decode()}, "logo"),
    ({"logo": image_b64("PNG", (3000, 4))}, "logo"),
    ({"logo": base64.b64encode(many_scan_jpeg(7000)).decode()}, "logo"),
    ({"accentColor": "red"}, "accentColor"),
    ({"accentColor": "#12345"}, "accentColor"),
    ({"accentColor": "#1a6b3c;}"}, "accentColor"),
    ({"accentColor": "url(https://evil.example/x)"}, "accentColor"),
    ({"displayName": "   "}, "displayName"),
    ({"displayName": "x" * 65}, "displayName"),
    ({"displayName": "Shop\u202eevil"}, "displayName"),
    ({"displayName": "Shop\nName"}, "displayName"),
    ({"displayName": 5}, "displayName"),
    ({"unknown": 1}, None),
]


@pytest.mark.parametrize(("fields", "field"), BAD_UPDATES)
async def test_a_refused_update_is_a_400_and_changes_nothing(
    app: RunningApp, fields: dict[str, Any], field: str | None
) -> None:
    owner = await owner_of(app)
    await owner.put(displayName="Shop", accentColor="#1a6b3c", logo=image_b64())
    before = await owner.get()

    # a valid change beside the bad one: nothing of the update is kept
    refused = await owner.put(**{"displayName": "Renamed", "accentColor": "#000000", **fields})

    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_request"
    if field is not None:
        assert error["details"].get("field") == field or field in error["message"]
    assert await owner.get() == before


async def test_a_body_over_the_brand_limit_is_413_and_changes_nothing(app: RunningApp) -> None:
    owner = await owner_of(app)
    refused = await owner.put(logo="A" * 200_000)

    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"
    assert await owner.get() == EMPTY


async def test_another_owners_brand_is_not_theirs_to_change(app: RunningApp) -> None:
    victim = await owner_of(app)
    attacker = await owner_of(app)
    await victim.put(displayName="Victim")

    refused = await app.http.put(
        PATH,
        json={"ownerAddress": victim.address, "displayName": "Pwned"},
        headers=key_headers(attacker.key),
    )

    assert refused.status_code in (401, 403)
    assert (await victim.get())["displayName"] == "Victim"


@pytest.mark.parametrize(
    "path",
    [
        "/pay/brand/" + "0" * 64 + ".png",
        "/pay/brand/../../etc/passwd.png",
        "/pay/brand/ABC.png",
        "/pay/brand/theme-1a6b3c.css",
        "/pay/brand/theme-1a6b3c-ffffff;x.css",
        "/pay/brand/theme-1A6B3C-FFFFFF.css",
    ],
)
async def test_unknown_brand_files_are_404(app: RunningApp, path: str) -> None:
    response = await app.http.get(path)

    assert response.status_code == 404


async def test_a_decode_past_its_limits_is_a_400_and_the_api_answers_meanwhile(
    app: RunningApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scan limit raised, so that the many-scan JPEG reaches the decoder (seconds of CPU).
    monkeypatch.setattr(logos, "MAX_JPEG_SCANS", 10_000, raising=False)
    owner = await owner_of(app)
    await owner.put(displayName="Shop", logo=image_b64())
    before = await owner.get()
    hostile = base64.b64encode(many_scan_jpeg(7000)).decode()

    upload = asyncio.create_task(owner.put(displayName="Renamed", logo=hostile))
    health_s = []  # each round: a health check, then 50 ms of pause
    while not upload.done():
        started = time.perf_counter()
        health = await app.http.get("/healthz")
        assert health.status_code == 200
        await asyncio.sleep(0.05)
        health_s.append(time.perf_counter() - started)
    refused = await upload
    after = await owner.get()
    accepted = await owner.put(logo=image_b64("JPEG"))

    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"] == {"field": "logo", "reason": "decode_time"}
    assert error["message"].startswith("logo took more than ")
    assert after == before
    # Answered all along: a decode on the event loop would hold a round for the decode's
    # seconds of CPU. A busy machine may delay one round now and then, not by that much.
    assert len(health_s) >= 5 and statistics.median(health_s) < 0.3
    assert max(health_s) < logo_process.LIMITS.cpu_s
    assert accepted.status_code == 200 and accepted.json()["logoUrl"] != before["logoUrl"]
