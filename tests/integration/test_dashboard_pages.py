"""The dashboard's pages and actions over real HTTP: create, list, CSV against the API's
list, keys, webhooks, settings; and another owner's session seeing and touching none of it."""

from __future__ import annotations

import contextlib
import csv
import io
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.auth import ApiKey
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventEndpoint, OwnerSettings, WebhookEvent
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.signing import new_owner


@pytest.fixture
async def dash(make_services: MakeServices) -> Any:
    async with dashboard_app(make_services) as app:
        yield app


@contextlib.asynccontextmanager
async def signed_in_client(
    app: RunningApp, chain_id: int
) -> AsyncIterator[tuple[httpx.AsyncClient, Any, str]]:
    owner = new_owner()
    async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
        assert (await sign_in(client, owner, chain_id)).status_code == 200
        csrf = csrf_of((await client.get("/dashboard")).text)
        yield client, owner, csrf


async def test_an_invoice_created_in_the_dashboard_is_the_apis_invoice(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        page = await client.post(
            "/dashboard/invoices/new",
            data={
                "csrf": csrf,
                "asset": f"{dev.chain_id}:{dev.token}",
                "amount": "12.5",
                "invoiceId": "order-77",
                "description": "Two mugs",
                "expiresInMinutes": "90",
            },
        )
        assert page.status_code == 201, page.text
        url = re.search(r'id="hosted-url" href="([^"]+)"', page.text)
        assert url is not None
        key = await issue_api_key(dash.services, owner)
        listed = await dash.http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers=key_headers(key),
        )
        (item,) = listed.json()["items"]
        assert url.group(1) == item["url"]
        assert (item["invoiceId"], item["amount"], item["tokenAddress"]) == (
            "order-77",
            "12.5",
            dev.token,
        )
        assert item["description"] == "Two mugs"
        assert item["expiresAt"] - item["createdAt"] == 90 * 60_000
        async with dash.services.db.sessions() as session:
            row = await session.scalar(select(Invoice).where(Invoice.id == item["id"]))
        assert row is not None and row.auth_mode == "dashboard"
        detail = await client.get(f"/dashboard/invoices/{item['id']}")
        assert detail.status_code == 200
        assert item["paymentAddress"] in detail.text


async def test_a_refused_create_shows_the_apis_error_and_creates_nothing(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        page = await client.post(
            "/dashboard/invoices/new",
            data={"csrf": csrf, "asset": f"{dev.chain_id}:{dev.token}", "amount": "1.1234567"},
        )
        missing_csrf = await client.post(
            "/dashboard/invoices/new",
            data={"asset": f"{dev.chain_id}:{dev.token}", "amount": "1"},
        )
    assert page.status_code == 400
    assert "amount has more than 6 fraction digits for this token" in page.text
    assert missing_csrf.status_code == 403
    async with dash.services.db.sessions() as session:
        rows = await session.scalars(
            select(Invoice).where(Invoice.owner_key == owner.address.lower())
        )
        assert rows.all() == []


async def test_the_csv_export_is_exactly_the_filtered_list(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        key = await issue_api_key(dash.services, owner)
        for n in range(7):
            body = {
                "ownerAddress": owner.address,
                "chainId": dev.chain_id,
                "amount": f"{n + 1}",
                "invoiceId": f"inv-{n}",
                "description": "=HYPERLINK(1)" if n == 3 else f"n{n}",
            }
            if n % 2:
                body["tokenAddress"] = dev.token
            created = await dash.http.post(
                "/integration/invoices", json=body, headers=key_headers(key)
            )
            assert created.status_code == 201
        api = await dash.http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address, "tokenAddress": dev.token, "limit": 100},
            headers=key_headers(key),
        )
        exported = await client.get("/dashboard/invoices.csv", params={"token": dev.token})
        everything = await client.get("/dashboard/invoices.csv")
        listed = await client.get("/dashboard/invoices", params={"token": dev.token})
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [r["id"] for r in rows] == [i["id"] for i in api.json()["items"]]
    assert [r["invoiceId"] for r in rows] == ["inv-5", "inv-3", "inv-1"]
    assert {r["amount"] for r in rows} == {"6", "4", "2"}
    assert next(r for r in rows if r["invoiceId"] == "inv-3")["description"] == "'=HYPERLINK(1)"
    assert len(list(csv.DictReader(io.StringIO(everything.text)))) == 7
    assert "3 invoices match." in listed.text


async def test_paging_walks_every_invoice_once(dash: RunningApp, dev: DevDeployment) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, _csrf):
        key = await issue_api_key(dash.services, owner)
        for _ in range(55):
            body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
            created = await dash.http.post(
                "/integration/invoices", json=body, headers=key_headers(key)
            )
            assert created.status_code == 201
        first = await client.get("/dashboard/invoices")
        next_href = re.search(r'id="next-page" href="([^"]+)"', first.text)
        assert next_href is not None
        second = await client.get(next_href.group(1).replace("&amp;", "&"))
        searched = await client.get("/dashboard/invoices", params={"q": "1"})
        bad = await client.get("/dashboard/invoices", params={"status": "nope"})
    ids_1 = re.findall(r'href="/dashboard/invoices/([0-9a-f-]{36})"', first.text)
    ids_2 = re.findall(r'href="/dashboard/invoices/([0-9a-f-]{36})"', second.text)
    assert len(ids_1) == 50 and len(ids_2) == 5
    assert not set(ids_1) & set(ids_2)
    assert 'id="next-page"' not in second.text
    assert "1 invoice matches." in searched.text
    assert bad.status_code == 400


async def test_keys_webhooks_and_settings_go_through_the_apis_actions(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        issued = await client.post("/dashboard/api-keys", data={"csrf": csrf, "label": "shop"})
        key = re.search(r'id="new-key-value">(sk_[^<]+)<', issued.text)
        assert issued.status_code == 201 and key is not None
        works = await dash.http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers=key_headers(key.group(1)),
        )
        assert works.status_code == 200
        async with dash.services.db.sessions() as session:
            key_row = await session.scalar(
                select(ApiKey).where(ApiKey.owner_key == owner.address.lower())
            )
        assert key_row is not None and key_row.label == "shop"
        assert key_row.last_used_at is not None  # the request above used it
        keys_page = await client.get("/dashboard/api-keys")
        assert "<td>never</td>" not in keys_page.text and "Last used" in keys_page.text
        revoked = await client.post(f"/dashboard/api-keys/{key_row.id}/revoke", data={"csrf": csrf})
        assert revoked.status_code == 303
        refused = await dash.http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers=key_headers(key.group(1)),
        )
        assert refused.status_code == 401

        added = await client.post(
            "/dashboard/webhooks/endpoints",
            data={
                "csrf": csrf,
                "url": "http://127.0.0.1:9/hook",
                "description": "shop",
                "event": ["invoice.paid", "invoice.refunded"],
            },
        )
        assert added.status_code == 303
        async with dash.services.db.sessions() as session:
            endpoint = await session.scalar(
                select(EventEndpoint).where(EventEndpoint.owner_key == owner.address.lower())
            )
        assert endpoint is not None
        assert endpoint.events == ["invoice.paid", "invoice.refunded"]
        pinged = await client.post(
            f"/dashboard/webhooks/endpoints/{endpoint.id}/ping", data={"csrf": csrf}
        )
        disabled = await client.post(
            f"/dashboard/webhooks/endpoints/{endpoint.id}/disable", data={"csrf": csrf}
        )
        assert pinged.status_code == 303 and disabled.status_code == 303
        page = await client.get("/dashboard/webhooks")
        assert "ping" in page.text and "disabled by the owner" in page.text

        secret = await client.post("/dashboard/webhooks/secrets", data={"csrf": csrf})
        assert secret.status_code == 201 and 'id="new-secret-value"' in secret.text

        header = await client.post("/dashboard/settings/webhook-header", data={"csrf": csrf})
        assert header.status_code == 303
        async with dash.services.db.sessions() as session:
            choice = await session.get(OwnerSettings, owner.address.lower())
        assert choice is not None and choice.webhook_api_key_header is False
        settings_page = await client.get("/dashboard/settings")
        assert settings_page.status_code == 200
        export = await client.get(f"/dashboard/escrows.ndjson?chain={dev.chain_id}")
        assert export.status_code == 200 and export.text == ""


async def test_another_owners_session_sees_and_touches_nothing(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with (
        signed_in_client(dash, dev.chain_id) as (alice, alice_owner, alice_csrf),
        signed_in_client(dash, dev.chain_id) as (mallory, _mallory_owner, csrf),
    ):
        created = await alice.post(
            "/dashboard/invoices/new",
            data={"csrf": alice_csrf, "asset": f"{dev.chain_id}:native", "amount": "1"},
        )
        invoice_pk = re.search(r'href="/dashboard/invoices/([0-9a-f-]{36})"', created.text)
        assert invoice_pk is not None
        await alice.post("/dashboard/api-keys", data={"csrf": alice_csrf, "label": "a"})
        await alice.post(
            "/dashboard/webhooks/endpoints",
            data={"csrf": alice_csrf, "url": "http://127.0.0.1:9/a"},
        )
        async with dash.services.db.sessions() as session:
            key_row = await session.scalar(
                select(ApiKey).where(ApiKey.owner_key == alice_owner.address.lower())
            )
            endpoint = await session.scalar(
                select(EventEndpoint).where(EventEndpoint.owner_key == alice_owner.address.lower())
            )
        assert key_row is not None and endpoint is not None
        target = invoice_pk.group(1)

        seen = [
            await mallory.get(f"/dashboard/invoices/{target}"),
            await mallory.get(f"/dashboard/invoices/{target}/summary"),
            await mallory.post(
                f"/dashboard/invoices/{target}/refund/prepare",
                json={"to": alice_owner.address, "amount": "1"},
                headers={"x-csrf-token": csrf},
            ),
        ]
        touched = [
            await mallory.post(f"/dashboard/api-keys/{key_row.id}/revoke", data={"csrf": csrf}),
            await mallory.post(
                f"/dashboard/webhooks/endpoints/{endpoint.id}/disable", data={"csrf": csrf}
            ),
            await mallory.post(
                f"/dashboard/webhooks/endpoints/{endpoint.id}/ping", data={"csrf": csrf}
            ),
        ]
        listed = await mallory.get("/dashboard/invoices.csv")

    assert [r.status_code for r in seen] == [404, 404, 404]
    assert [r.status_code for r in touched] == [404, 404, 404]
    assert listed.text.count("\n") == 1  # the header alone
    async with dash.services.db.sessions() as session:
        key_after = await session.get(ApiKey, key_row.id)
        endpoint_after = await session.get(EventEndpoint, endpoint.id)
    assert key_after is not None and key_after.revoked_at is None
    assert endpoint_after is not None and endpoint_after.enabled


async def test_test_pings_and_redeliveries_share_the_apis_hourly_limits(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    async with (
        dashboard_app(make_services, webhook_test_per_hour=1, event_redelivery_per_hour=1) as app,
        signed_in_client(app, dev.chain_id) as (client, owner, csrf),
    ):
        await client.post(
            "/dashboard/webhooks/endpoints", data={"csrf": csrf, "url": "http://127.0.0.1:9/x"}
        )
        async with app.services.db.sessions() as session:
            endpoint = await session.scalar(
                select(EventEndpoint).where(EventEndpoint.owner_key == owner.address.lower())
            )
        assert endpoint is not None
        ping = f"/dashboard/webhooks/endpoints/{endpoint.id}/ping"
        first = await client.post(ping, data={"csrf": csrf})
        second = await client.post(ping, data={"csrf": csrf})
        async with app.services.db.sessions() as session:
            event_id = await session.scalar(
                select(WebhookEvent.event_id).where(WebhookEvent.endpoint_id == endpoint.id)
            )
        redeliver = f"/dashboard/events/{event_id}/redeliver?endpoint={endpoint.id}"
        again = await client.post(redeliver, data={"csrf": csrf})
        too_many = await client.post(redeliver, data={"csrf": csrf})
        async with app.services.db.sessions() as session:
            queued = await session.scalar(
                select(func.count())
                .select_from(WebhookEvent)
                .where(WebhookEvent.endpoint_id == endpoint.id)
            )

    assert (first.status_code, second.status_code) == (303, 429)
    assert "too many requests" in second.text
    assert (again.status_code, too_many.status_code) == (303, 429)
    assert queued == 2  # the first ping and the first redelivery; nothing for the refused


async def test_an_invoice_priced_in_fiat_shows_its_price_and_accepted_shortfall(
    dash: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, _csrf):
        headers = key_headers(await issue_api_key(dash.services, owner))
        owner_body = {"ownerAddress": owner.address}
        tolerance = {**owner_body, "underpaymentToleranceBps": 100}
        assert (
            await dash.http.put("/integration/settings", json=tolerance, headers=headers)
        ).status_code == 200
        body = {**owner_body, "chainId": dev.chain_id, "amount": "19.99", "currency": "USD"}
        created = await dash.http.post(
            "/integration/invoices", json={**body, "tokenAddress": dev.token}, headers=headers
        )
        invoice = created.json()
        transfer = encode_call(TEST_TOKEN, "transfer", invoice["paymentAddress"], 19_890_000)
        assert (await evm.transact(DEV_PRIVATE_KEYS[4], dev.token, transfer))["status"] == 1
        status = await dash.http.get(
            "/integration/invoices/status",
            params={**owner_body, "paymentAddress": invoice["paymentAddress"]},
            headers=headers,
        )
        assert status.json()["invoice"]["status"] == "paid"

        detail = await client.get(f"/dashboard/invoices/{invoice['id']}")

    assert re.search(r'id="price">([^<]*)<', detail.text)[1] == "19.99 USD at 1 USD per TUSD"  # type: ignore[index]
    assert re.search(r'id="shortfall">([^<]*)<', detail.text)[1] == "0.1 TUSD"  # type: ignore[index]
