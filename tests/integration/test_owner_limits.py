"""Per-owner limits on what an owner can make the service do: the cap on watched invoices
and the webhookUrl rules at creation, over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.deploy import DevDeployment
from invoicing.outbound.guard import webhook_url_problem
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.web.api.invoices import create_rules
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PATH = "/integration/invoices"


@asynccontextmanager
async def running(services: Services) -> AsyncIterator[RunningApp]:
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def invoices_of(services: Services, owner: LocalAccount) -> int:
    async with services.db.sessions() as session:
        total = await session.scalar(
            select(func.count())
            .select_from(Invoice)
            .where(Invoice.owner_key == owner.address.lower())
        )
    return int(total or 0)


async def test_an_owner_at_the_watched_cap_is_refused_until_one_stops_being_watched(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    services = await make_services(max_watched_invoices_per_owner=2)
    owner, other = new_owner(), new_owner()
    key, other_key = await issue_api_key(services, owner), await issue_api_key(services, other)

    def body(**fields: Any) -> dict[str, Any]:
        return {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}

    async with running(services) as app:
        first = await app.http.post(PATH, json=body(invoiceId="a"), headers=key_headers(key))
        second = await app.http.post(PATH, json=body(), headers=key_headers(key))
        refused = await app.http.post(PATH, json=body(invoiceId="c"), headers=key_headers(key))
        retry = await app.http.post(PATH, json=body(invoiceId="a"), headers=key_headers(key))
        others = await app.http.post(
            PATH, json={**body(), "ownerAddress": other.address}, headers=key_headers(other_key)
        )
        assert await invoices_of(services, owner) == 2
        deleted = await app.http.delete(
            PATH,
            params={"ownerAddress": owner.address, "chainId": str(dev.chain_id), "invoiceId": "a"},
            headers=key_headers(key),
        )
        after_delete = await app.http.post(PATH, json=body(invoiceId="c"), headers=key_headers(key))

    assert [first.status_code, second.status_code] == [201, 201]
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "60"
    assert refused.json()["error"]["code"] == "rate_limited"
    assert refused.json()["error"]["details"] == {"retryAfterS": 60}
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"]
    assert others.status_code == 201
    assert deleted.status_code == 200
    assert after_delete.status_code == 201
    assert await invoices_of(services, owner) == 3


async def test_creating_and_deleting_in_a_loop_stops_at_the_daily_creation_limit(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    """Deleted invoices leave the watched cap, but each escrow is still read once more after
    its window: the daily creation limit bounds that work."""
    services = await make_services(
        max_watched_invoices_per_owner=1, invoice_creation_per_owner_per_day=3
    )
    owner, other = new_owner(), new_owner()
    key, other_key = await issue_api_key(services, owner), await issue_api_key(services, other)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    where = {"ownerAddress": owner.address, "chainId": str(dev.chain_id)}

    async with running(services) as app:
        answers = []
        for n in range(4):
            created = await app.http.post(
                PATH, json={**body, "invoiceId": f"loop-{n}"}, headers=key_headers(key)
            )
            answers.append(created)
            if created.status_code == 201:
                deleted = await app.http.delete(
                    PATH, params={**where, "invoiceId": f"loop-{n}"}, headers=key_headers(key)
                )
                assert deleted.status_code == 200, deleted.text
        others = await app.http.post(
            PATH, json={**body, "ownerAddress": other.address}, headers=key_headers(other_key)
        )

    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    refused = answers[-1].json()["error"]
    assert refused["code"] == "rate_limited"
    retry_after_s = refused["details"]["retryAfterS"]
    assert answers[-1].headers["retry-after"] == str(retry_after_s)
    assert 0 < retry_after_s <= 86_400  # until the end of the UTC day
    assert await invoices_of(services, owner) == 3
    assert others.status_code == 201


async def test_concurrent_creates_never_pass_the_watched_cap(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    services = await make_services(max_watched_invoices_per_owner=3)
    owner = new_owner()
    key = await issue_api_key(services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}

    async with running(services) as app:
        answers = await asyncio.gather(
            *(app.http.post(PATH, json=body, headers=key_headers(key)) for _ in range(8))
        )

    assert sorted(a.status_code for a in answers) == [201] * 3 + [429] * 5
    assert await invoices_of(services, owner) == 3


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost/hook",
        "https://LOCALHOST./hook",
        "https://shop.localhost:8443/hook",
        "http://127.0.0.1:9/hook",
        "http://2130706433/hook",  # 127.0.0.1 in the resolver's decimal form
        "http://0x7f.1/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[64:ff9b::a9fe:a9fe]/hook",
        "http://[2002:a00:1::1]/hook",
        "http://[fec0::1]/hook",
    ],
)
async def test_a_webhook_url_that_can_never_be_delivered_is_refused_at_creation(
    make_services: MakeServices, dev: DevDeployment, url: str
) -> None:
    services = await make_services(webhook_allow_private=False)
    owner = new_owner()
    key = await issue_api_key(services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}

    async with running(services) as app:
        refused = await app.http.post(
            PATH, json={**body, "webhookUrl": url}, headers=key_headers(key)
        )
        assert await invoices_of(services, owner) == 0
        public = await app.http.post(
            PATH,
            json={**body, "webhookUrl": "https://hooks.example/paid"},
            headers=key_headers(key),
        )

    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": "invalid_request",
        "message": "webhookUrl: destination not allowed",
        "details": {"field": "webhookUrl"},
    }
    assert public.status_code == 201


def test_outside_development_a_webhook_url_must_be_https_unless_allowed() -> None:
    secret = "s" * 40
    production = create_rules(Settings(environment="production", secret=secret))
    allowed = create_rules(
        Settings(environment="production", secret=secret, webhook_allow_http=True)
    )
    development = create_rules(Settings(environment="development"))

    def problem(rules: Any, url: str) -> str | None:
        return webhook_url_problem(
            url,
            require_https=rules.require_https_webhook,
            allow_private=rules.allow_private_webhook,
        )

    assert problem(production, "http://hooks.example/paid") == "must be an https URL"
    assert problem(production, "https://hooks.example/paid") is None
    assert problem(production, "https://127.0.0.1/paid") == "destination not allowed"
    assert problem(allowed, "http://hooks.example/paid") is None
    assert problem(development, "http://hooks.example/paid") is None
