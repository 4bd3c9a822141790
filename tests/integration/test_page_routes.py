"""The hosted payment page and its public status JSON over real HTTP, on anvil."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import update

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from invoicing.web.page.qr import QrCache, QrStats, qr_svg
from invoicing.web.page.routes import QR_CACHE, qr_cache
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PAYER = DEV_PRIVATE_KEYS[6]
STATUS_KEYS = {
    "paymentAddress",
    "chainId",
    "network",
    "tokenAddress",
    "symbol",
    "decimals",
    "amount",
    "requiredRaw",
    "balanceRaw",
    "remainingRaw",
    "remaining",
    "paymentUri",
    "status",
    "expiresAt",
    "paidAt",
    "description",
}
UNKNOWN = "0x" + "ab" * 20


async def create(
    app: RunningApp, owner: LocalAccount, dev: DevDeployment, **fields: Any
) -> dict[str, Any]:
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}
    response = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
    assert response.status_code == 201, response.text
    invoice: dict[str, Any] = response.json()
    invoice["_key"] = key
    return invoice


def page_data(html: str) -> dict[str, Any]:
    pattern = r'<script type="application/json" id="payment-data"[^>]*>(.*?)</script>'
    match = re.search(pattern, html)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


async def test_page_of_a_native_invoice_shows_its_values(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    invoice = await create(app, owner, dev, amount="0.25", description="Order #42")
    escrow = invoice["paymentAddress"]

    response = await app.http.get(f"/pay/{escrow}")

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    html = response.text
    uri = f"ethereum:{escrow}@{dev.chain_id}?value=250000000000000000"
    assert '<span id="amount">0.25</span> <span class="symbol">ETH</span>' in html
    assert '<span id="remaining">0.25</span>' in html
    assert '<span id="network">Anvil (local)</span>' in html
    assert f'<code class="mono address" id="address" dir="ltr">{escrow}</code>' in html
    assert f'<a id="uri" href="{uri}">' in html
    assert '<p class="description" id="description">Order #42</p>' in html
    assert 'id="status" role="status" aria-live="polite">Awaiting payment</p>' in html
    assert 'id="pay-section" aria-labelledby="pay-heading">' in html  # visible
    assert 'id="done-section" hidden>' in html
    assert page_data(html) == (await app.http.get(f"/pay/{escrow}/status")).json()
    assert owner.address not in html and owner.address.lower() not in html


async def test_page_loads_nothing_from_other_origins(app: RunningApp, dev: DevDeployment) -> None:
    invoice = await create(app, new_owner(), dev)
    html = (await app.http.get(f"/pay/{invoice['paymentAddress']}")).text

    references = re.findall(r'(?:src|href)="([^"]*)"', html)

    page = f"/pay/{invoice['paymentAddress']}"
    assert sorted(references) == sorted(
        [
            *(
                f"{page}?lang={code}"
                for code in ("en", "es", "pt", "fr", "de", "zh-Hans", "ja", "ar")
            ),
            "data:,",
            next(r for r in references if r.startswith("/pay/assets/pay.css?v=")),
            next(r for r in references if r.startswith("/pay/assets/pay.js?v=")),
            f"/pay/{invoice['paymentAddress']}/qr.svg?lang=en&amp;r={10**18}",
            f"ethereum:{invoice['paymentAddress']}@{dev.chain_id}?value={10**18}",
        ]
    )
    for path in ("/pay/assets/pay.css", "/pay/assets/pay.js"):
        asset = await app.http.get(path)
        assert asset.status_code == 200 and asset.content
        assert asset.headers["cache-control"] == "public, max-age=86400"
    assert (await app.http.get("/pay/assets/pay.css")).headers["content-type"] == (
        "text/css; charset=utf-8"
    )


async def test_status_json_of_an_erc20_invoice_follows_partial_then_full_payment(
    app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    expires_at = int(time.time() * 1000) + 3_600_000
    invoice = await create(
        app,
        owner,
        dev,
        amount="12.5",
        tokenAddress=dev.token,
        expiresAt=expires_at,
        webhookUrl="http://127.0.0.1:9/hook",
        metadata={"secret": "internal"},
    )
    escrow = invoice["paymentAddress"]

    before = (await app.http.get(f"/pay/{escrow}/status")).json()
    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 5_000_000))
    app.services.settings.page_recheck_interval_s = 0.0
    partial = (await app.http.get(f"/pay/{escrow}/status")).json()
    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 7_500_000))
    full = (await app.http.get(f"/pay/{escrow}/status")).json()

    assert before == {
        "paymentAddress": escrow,
        "chainId": dev.chain_id,
        "network": "Anvil (local)",
        "tokenAddress": dev.token,
        "symbol": "TUSD",
        "decimals": 6,
        "amount": "12.5",
        "requiredRaw": "12500000",
        "balanceRaw": "0",
        "remainingRaw": "12500000",
        "remaining": "12.5",
        "paymentUri": f"ethereum:{dev.token}@{dev.chain_id}/transfer"
        f"?address={escrow}&uint256=12500000",
        "status": "pending",
        "expiresAt": expires_at,
        "paidAt": None,
        "description": None,
    }
    assert partial["status"] == "pending"
    assert (partial["balanceRaw"], partial["remainingRaw"], partial["remaining"]) == (
        "5000000",
        "7500000",
        "7.5",
    )
    assert partial["paymentUri"] == (
        f"ethereum:{dev.token}@{dev.chain_id}/transfer?address={escrow}&uint256=7500000"
    )
    assert full["status"] == "paid"
    assert full["paidAt"] is not None and full["paidAt"] >= invoice["createdAt"]
    assert (full["balanceRaw"], full["remainingRaw"], full["remaining"]) == ("12500000", "0", "0")
    assert set(full) == STATUS_KEYS


async def test_status_route_rechecks_the_chain_at_most_once_per_interval(
    make_services: MakeServices, dev: DevDeployment, evm: EvmClient
) -> None:
    services = await make_services(page_recheck_interval_s=60.0)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        app = RunningApp(base_url, services, http)
        invoice = await create(app, new_owner(), dev, amount="0.5")
        gateway = services.chains.get(dev.chain_id)
        assert isinstance(gateway, EvmGateway)
        escrow = invoice["paymentAddress"]

        calls_before = gateway.evm.rpc.calls
        first = await http.get(f"/pay/{escrow}/status")
        calls_after_first = gateway.evm.rpc.calls
        await evm.transact(PAYER, escrow, b"", value=5 * 10**17)
        second = [(await http.get(f"/pay/{escrow}/status")).json() for _ in range(5)]
        page = await http.get(f"/pay/{escrow}")

    assert first.json()["status"] == "pending"
    # One EscrowReader call at the newest block (it names the block: no eth_blockNumber on a
    # chain of one confirmation), and (once per gateway) eth_getCode: is the reader deployed?
    assert calls_after_first - calls_before == 2
    assert gateway.evm.rpc.calls == calls_after_first  # throttled: the DB answers
    assert [s["status"] for s in second] == ["pending"] * 5
    assert page.status_code == 200


async def test_deleted_invoice_still_has_its_page(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    invoice = await create(app, owner, dev, amount="3", invoiceId="gone-1")
    deleted = await app.http.delete(
        "/integration/invoices",
        params={"ownerAddress": owner.address, "chainId": dev.chain_id, "invoiceId": "gone-1"},
        headers=key_headers(invoice["_key"]),
    )
    escrow = invoice["paymentAddress"]

    html = (await app.http.get(f"/pay/{escrow}")).text
    status = (await app.http.get(f"/pay/{escrow}/status")).json()

    assert deleted.status_code == 200
    assert 'id="status" role="status" aria-live="polite">Cancelled</p>' in html
    assert 'id="pay-section" aria-labelledby="pay-heading" hidden>' in html
    assert "This invoice was cancelled" in html
    assert status["status"] == "cancelled" and status["remaining"] == "3"


async def test_pending_invoice_past_expiry_reads_expired(
    app: RunningApp, dev: DevDeployment
) -> None:
    # Two seconds leave a slow machine time to create it before it expires.
    expires_at = int(time.time() * 1000) + 2_000
    invoice = await create(app, new_owner(), dev, expiresAt=expires_at)
    escrow = invoice["paymentAddress"]
    await asyncio.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.2)

    status = (await app.http.get(f"/pay/{escrow}/status")).json()
    html = (await app.http.get(f"/pay/{escrow}")).text

    assert status["status"] == "expired"
    assert 'aria-live="polite">Expired</p>' in html
    assert "This invoice has expired" in html


async def test_description_is_escaped_everywhere(app: RunningApp, dev: DevDeployment) -> None:
    text = '</script><script>alert("x")</script><img src=x onerror=alert(1)> & more'
    invoice = await create(app, new_owner(), dev, description=text)

    html = (await app.http.get(f"/pay/{invoice['paymentAddress']}")).text

    assert "<script>alert" not in html and "<img src=x" not in html
    assert (
        '<p class="description" id="description">&lt;/script&gt;&lt;script&gt;alert(&#34;x&#34;)'
        "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; &amp; more</p>"
    ) in html
    assert page_data(html)["description"] == text
    # the page's texts, the data block and pay.js, nothing injected
    assert html.count("</script>") == 3


@pytest.mark.parametrize("address", [UNKNOWN, UNKNOWN.upper().replace("0X", "0x")])
async def test_unknown_address_gets_a_404_page(app: RunningApp, address: str) -> None:
    response = await app.http.get(f"/pay/{address}")

    assert response.status_code == 404
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert '<h1 id="error-title">Payment not found</h1>' in response.text


@pytest.mark.parametrize("address", ["0x1234", "nothex" + "0" * 36, "0x" + "g" * 40, "%3Cb%3E"])
async def test_malformed_address_gets_a_400_page(app: RunningApp, address: str) -> None:
    response = await app.http.get(f"/pay/{address}")

    assert response.status_code == 400
    assert '<h1 id="error-title">Not a payment link</h1>' in response.text
    assert "<b>" not in response.text


async def test_status_and_qr_of_unknown_or_malformed_address_use_the_error_shape(
    app: RunningApp,
) -> None:
    unknown = await app.http.get(f"/pay/{UNKNOWN}/status")
    malformed = await app.http.get("/pay/0x12/status")
    qr = await app.http.get(f"/pay/{UNKNOWN}/qr.svg")
    asset = await app.http.get("/pay/assets/secrets.txt")

    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": {"code": "not_found", "message": "no invoice with this paymentAddress"}
    }
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == "invalid_request"
    assert qr.status_code == 404 and qr.json()["error"]["code"] == "not_found"
    assert asset.status_code == 404 and asset.json()["error"]["code"] == "not_found"


async def test_qr_svg_is_served_for_the_current_request(
    app: RunningApp, dev: DevDeployment
) -> None:
    invoice = await create(app, new_owner(), dev, amount="2", tokenAddress=dev.token)

    path = f"/pay/{invoice['paymentAddress']}/qr.svg"
    response = await app.http.get(path)
    german = await app.http.get(path, params={"lang": "de"})
    japanese = await app.http.get(path, headers={"accept-language": "ja"})
    page = await app.http.get(f"/pay/{invoice['paymentAddress']}", params={"lang": "de"})

    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.text.startswith('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ')
    assert "<title>Pay 2 TUSD</title>" in response.text
    assert "<title>2 TUSD bezahlen</title>" in german.text
    assert german.headers["content-language"] == "de"
    assert "<title>2 TUSD を支払う</title>" in japanese.text
    # The page asks for its QR code in its own language, and so does pay.js.
    assert f'src="{path}?lang=de&amp;r=2000000"' in page.text
    assert f'data-qr-url="{path}?lang=de"' in page.text


async def test_qr_codes_render_off_the_event_loop_once_per_invoice_and_never_for_unknown(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    services = await make_services()
    loop_thread = threading.get_ident()
    rendered_on: list[int] = []

    def counting_render(text: str, title: str) -> str:
        rendered_on.append(threading.get_ident())
        return qr_svg(text, title)

    cache = QrCache(render=counting_render)
    QR_CACHE.put(services.db, cache)
    assert qr_cache(services) is cache
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        app = RunningApp(base_url, services, http)
        unknown = [await http.get(f"/pay/{UNKNOWN}/qr.svg?r={i}") for i in range(3)]
        assert [r.status_code for r in unknown] == [404, 404, 404]
        assert rendered_on == [] and cache.stats == QrStats(hits=0, renders=0)

        invoice = await create(app, new_owner(), dev, amount="2")
        path = f"/pay/{invoice['paymentAddress']}/qr.svg"
        answers = await asyncio.gather(*(http.get(f"{path}?r={i}") for i in range(4)))

    assert [a.status_code for a in answers] == [200] * 4
    assert len({a.text for a in answers}) == 1
    assert len(rendered_on) == 1 and rendered_on[0] != loop_thread
    assert cache.stats == QrStats(hits=3, renders=1)


async def test_a_paid_page_returns_to_the_shop_by_itself_only_within_ten_minutes_of_payment(
    app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    shop = "https://shop.example/thanks?order=17"
    invoice = await create(app, new_owner(), dev, amount="0.001", redirectUrl=shop)
    escrow = invoice["paymentAddress"]
    await evm.transact(PAYER, escrow, value=10**15)
    app.services.settings.page_recheck_interval_s = 0.0
    paid = (await app.http.get(f"/pay/{escrow}/status")).json()
    assert paid["status"] == "paid"

    fresh = (await app.http.get(f"/pay/{escrow}")).text
    # The same invoice, paid 10 minutes and 1 ms before now.
    async with app.services.db.transaction() as session:
        await session.execute(
            update(Invoice)
            .where(Invoice.payment_address == escrow)
            .values(paid_at=int(time.time() * 1000) - 600_001)
        )
    later = (await app.http.get(f"/pay/{escrow}")).text

    until = paid["paidAt"] + 600_000
    assert f' data-auto-return-window-ms="600000" data-auto-return-until="{until}">' in fresh
    assert 'data-auto-return-window-ms="600000">' in later
    assert "data-auto-return-until" not in later
    for html in (fresh, later):
        assert f'<a class="button-link" id="return-link" href="{shop.replace("&", "&amp;")}">' in (
            html
        )
