"""What strangers and owners type reaches the dashboard's pages as text, never as markup:
an invoice's description, a key's label, a webhook endpoint's URL and description, an email
address shown back on a refused form. Escaped once (autoescape), never twice."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from invoicing.chain.deploy import DevDeployment
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.signing import new_owner

HOSTILE = "<script>alert(1)</script> & co"
SHOWN = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"
HOOK = "http://127.0.0.1:9/hook?a=1&b=<script>"


@pytest.fixture
async def dash(make_services: MakeServices) -> Any:
    async with dashboard_app(make_services) as app:
        yield app


def assert_no_markup_from(page: httpx.Response) -> None:
    assert "<script>alert" not in page.text
    assert "&amp;lt;" not in page.text and "&amp;amp;" not in page.text


async def test_typed_values_are_escaped_once_on_every_page(
    dash: RunningApp, dev: DevDeployment
) -> None:
    async with httpx.AsyncClient(base_url=dash.base_url, timeout=30) as client:
        assert (await sign_in(client, new_owner(), dev.chain_id)).status_code == 200
        csrf = csrf_of((await client.get("/dashboard")).text)
        created = await client.post(
            "/dashboard/invoices/new",
            data={
                "csrf": csrf,
                "asset": f"{dev.chain_id}:{dev.token}",
                "amount": "1",
                "description": HOSTILE,
            },
        )
        issued = await client.post("/dashboard/api-keys", data={"csrf": csrf, "label": HOSTILE})
        added = await client.post(
            "/dashboard/webhooks/endpoints",
            data={"csrf": csrf, "url": HOOK, "description": HOSTILE},
        )
        mailed = await client.post("/dashboard/email", data={"csrf": csrf, "email": HOSTILE})
        found = re.search(r'href="(/dashboard/invoices/[^"]+)" id="created-detail"', created.text)
        assert created.status_code == 201 and found is not None
        detail = await client.get(found.group(1))
        webhooks = await client.get("/dashboard/webhooks")

    assert f"<dt>Description</dt><dd>{SHOWN}</dd>" in detail.text
    assert_no_markup_from(detail)
    assert issued.status_code == 201
    assert f'<td data-label="Label">{SHOWN}</td>' in issued.text
    assert f'aria-label="Revoke key {SHOWN}"' in issued.text
    assert f"<strong>Your new key {SHOWN}</strong>" in issued.text
    assert_no_markup_from(issued)
    assert added.status_code == 303
    url = "http://127.0.0.1:9/hook?a=1&amp;b=&lt;script&gt;"
    assert f'<span class="mono">{url}</span>' in webhooks.text
    assert f'aria-label="Send test ping {url}"' in webhooks.text
    assert f'<span class="muted">{SHOWN}</span>' in webhooks.text
    assert_no_markup_from(webhooks)
    assert mailed.status_code == 400
    assert f'name="email" type="email" required size="40" value="{SHOWN}"' in mailed.text
    assert_no_markup_from(mailed)
