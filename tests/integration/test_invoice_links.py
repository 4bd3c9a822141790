"""redirectUrl and cancelUrl over real HTTP: echoed in every representation, shown on the
payment page, and refused (400, nothing created) when a browser should not follow them."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from invoicing.chain.deploy import DevDeployment
from invoicing.invoices.links import link_problem
from invoicing.settings import Settings
from invoicing.web.api.invoices import create_rules
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.invoices import PATH, count_invoices
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

THANKS = "https://shop.example/orders/17?paid=1"
CART = "https://shop.example/cart"


async def post(
    app: RunningApp, dev: DevDeployment, **fields: Any
) -> tuple[httpx.Response, str, str]:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}
    response = await app.http.post(PATH, json=body, headers=key_headers(key))
    return response, owner.address, key


async def test_links_are_echoed_by_create_status_and_list_and_the_page_offers_them(
    app: RunningApp, dev: DevDeployment
) -> None:
    created, owner, key = await post(
        app, dev, invoiceId="links-1", redirectUrl=THANKS, cancelUrl=CART
    )
    escrow = created.json()["paymentAddress"]
    status = await app.http.get(
        f"{PATH}/status",
        params={"ownerAddress": owner, "paymentAddress": escrow},
        headers=key_headers(key),
    )
    listed = await app.http.get(PATH, params={"ownerAddress": owner}, headers=key_headers(key))
    retry = await app.http.post(
        PATH,
        json={
            "ownerAddress": owner,
            "chainId": dev.chain_id,
            "amount": "1",
            "invoiceId": "links-1",
            "redirectUrl": THANKS,
            "cancelUrl": CART,
        },
        headers=key_headers(key),
    )
    changed = await app.http.post(
        PATH,
        json={
            "ownerAddress": owner,
            "chainId": dev.chain_id,
            "amount": "1",
            "invoiceId": "links-1",
            "redirectUrl": THANKS + "&x=1",
            "cancelUrl": CART,
        },
        headers=key_headers(key),
    )
    page = (await app.http.get(f"/pay/{escrow}")).text

    assert created.status_code == 201
    for invoice in (created.json(), status.json()["invoice"], listed.json()["items"][0]):
        assert (invoice["redirectUrl"], invoice["cancelUrl"]) == (THANKS, CART)
    assert (retry.status_code, retry.json()["id"]) == (200, created.json()["id"])
    assert (changed.status_code, changed.json()["error"]["code"]) == (409, "invoice_exists")
    # Pending: the way back without paying; the redirect waits for the payment.
    assert f'<a id="cancel-link" href="{CART}">Cancel and return to shop.example</a>' in page
    assert 'data-redirect-url="https://shop.example/orders/17?paid=1"' in page
    assert re.search(
        r'id="return" data-redirect-url="[^"]*" data-cancel-url="https://shop\.example/cart"'
        r"[^>]* hidden>",
        page,
    )


async def test_an_invoice_without_links_shows_neither(app: RunningApp, dev: DevDeployment) -> None:
    created, _owner, _key = await post(app, dev)
    page = (await app.http.get(f"/pay/{created.json()['paymentAddress']}")).text

    assert "redirectUrl" not in created.json() and "cancelUrl" not in created.json()
    assert 'id="cancel-link"' not in page and 'id="return"' not in page


BAD_LINKS = [
    "javascript:alert(1)",
    "JavaScript://shop.example/%0aalert(1)",
    "data:text/html,<script>alert(1)</script>",
    "ftp://shop.example/thanks",
    "/orders/17",
    "//shop.example/orders/17",
    "https:shop.example",
    "https://user:pass@shop.example/",
    "https:\\\\evil.example/",
    "https://shop.example/ thanks",
    "https://shop.example/é",
    "https://shop.example:99999/",
    "https://shop.example/" + "a" * 2028,  # 2,049 characters
    "",
]


@pytest.mark.parametrize("field", ["redirectUrl", "cancelUrl"])
@pytest.mark.parametrize("url", BAD_LINKS)
async def test_a_link_a_browser_should_not_follow_is_refused_and_nothing_is_created(
    app: RunningApp, dev: DevDeployment, field: str, url: str
) -> None:
    response, owner, _key = await post(app, dev, **{field: url})

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"] or error["details"].get("field") == field
    assert await count_invoices(app, owner) == 0


async def test_a_link_of_exactly_2048_characters_is_accepted(
    app: RunningApp, dev: DevDeployment
) -> None:
    url = "https://shop.example/" + "a" * 2027
    response, _owner, _key = await post(app, dev, redirectUrl=url)

    assert len(url) == 2048
    assert response.status_code == 201 and response.json()["redirectUrl"] == url


def test_outside_development_links_must_be_https() -> None:
    production = create_rules(Settings(environment="production", secret="s" * 40))
    development = create_rules(Settings(environment="development"))

    assert (production.require_https_links, development.require_https_links) == (True, False)
    assert link_problem("http://shop.example/t", require_https=True) == "must be https"
    assert link_problem("http://shop.example/t", require_https=False) is None
    assert link_problem(THANKS, require_https=True) is None
