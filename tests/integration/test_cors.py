"""CORS by route over real HTTP: client-facing routes for other origins, /integration/* only
for origins the operator allows, never with credentials."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from invoicing.chain.deploy import DevDeployment
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

SHOP = "https://shop.example"
ADMIN = "https://admin.example"


def preflight(method: str, headers: str = "content-type", origin: str = SHOP) -> dict[str, str]:
    return {
        "origin": origin,
        "access-control-request-method": method,
        "access-control-request-headers": headers,
    }


async def client(
    make_services: MakeServices, **settings: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    services = await make_services(**settings)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        yield http, services


@pytest.fixture
async def default_http(make_services: MakeServices) -> AsyncIterator[httpx.AsyncClient]:
    async for http, _services in client(make_services):
        yield http


async def test_client_routes_answer_preflights_for_any_origin_by_default(
    default_http: httpx.AsyncClient,
) -> None:
    fees = await default_http.options("/fees/set-meta", headers=preflight("POST"))
    status = await default_http.options(
        f"/pay/{new_owner().address}/status", headers=preflight("GET", "")
    )

    assert fees.status_code == 204
    assert fees.headers["access-control-allow-origin"] == "*"
    assert fees.headers["access-control-allow-methods"] == "POST"
    assert fees.headers["access-control-allow-headers"] == "content-type"
    assert "access-control-allow-credentials" not in fees.headers
    assert status.status_code == 204
    assert status.headers["access-control-allow-methods"] == "GET"


async def test_client_route_answers_carry_allow_origin_errors_included(
    default_http: httpx.AsyncClient, dev: DevDeployment
) -> None:
    unknown = await default_http.get(f"/pay/{new_owner().address}/status", headers={"origin": SHOP})
    refused = await default_http.post(
        "/fees/set-meta", json={"ownerAddress": "nope"}, headers={"origin": SHOP}
    )

    assert unknown.status_code == 404
    assert unknown.headers["access-control-allow-origin"] == "*"
    assert refused.status_code == 400
    assert refused.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in refused.headers


async def test_integration_routes_stay_server_to_server_by_default(
    default_http: httpx.AsyncClient, dev: DevDeployment, make_services: MakeServices
) -> None:
    owner = new_owner()
    params = {"ownerAddress": owner.address}

    asked = await default_http.options("/integration/invoices", headers=preflight("GET"))
    listed = await default_http.get(
        "/integration/invoices", params=params, headers={"origin": SHOP}
    )
    page = await default_http.get(f"/pay/{owner.address}", headers={"origin": SHOP})
    health = await default_http.get("/healthz", headers={"origin": SHOP})

    assert asked.status_code == 405
    assert "access-control-allow-origin" not in asked.headers
    assert listed.status_code == 401
    assert "access-control-allow-origin" not in listed.headers
    assert "access-control-allow-origin" not in page.headers
    assert "access-control-allow-origin" not in health.headers


async def test_configured_origins_limit_client_routes_and_open_integration(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    owner = new_owner()
    async for http, services in client(
        make_services, cors_allow_origins=SHOP, cors_integration_allow_origins=ADMIN
    ):
        key = await issue_api_key(services, owner)
        shop_fees = await http.options("/fees/set-meta", headers=preflight("POST"))
        other_fees = await http.options(
            "/fees/set-meta", headers=preflight("POST", origin="https://evil.example")
        )
        shop_integration = await http.options("/integration/invoices", headers=preflight("GET"))
        admin_preflight = await http.options(
            "/integration/invoices",
            headers=preflight("DELETE", "x-service-api-key", origin=ADMIN),
        )
        admin_list = await http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers={**key_headers(key), "origin": ADMIN},
        )

    assert shop_fees.status_code == 204
    assert shop_fees.headers["access-control-allow-origin"] == SHOP
    assert shop_fees.headers["vary"] == "Origin"
    assert other_fees.status_code == 405
    assert "access-control-allow-origin" not in other_fees.headers
    assert "access-control-allow-origin" not in shop_integration.headers
    assert admin_preflight.status_code == 204
    assert admin_preflight.headers["access-control-allow-origin"] == ADMIN
    assert admin_preflight.headers["access-control-allow-methods"] == (
        "DELETE, GET, PATCH, POST, PUT"
    )
    assert "x-service-api-key" in admin_preflight.headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in admin_preflight.headers
    assert admin_list.status_code == 200
    assert admin_list.headers["access-control-allow-origin"] == ADMIN


async def test_allowed_integration_origins_may_call_every_method_the_routes_use(
    make_services: MakeServices,
) -> None:
    owner = new_owner()
    async for http, services in client(make_services, cors_integration_allow_origins=ADMIN):
        key = await issue_api_key(services, owner)
        put = await http.options(
            "/integration/settings", headers=preflight("PUT", "x-service-api-key", ADMIN)
        )
        patch = await http.options(
            "/integration/webhook-endpoints",
            headers=preflight("PATCH", "x-service-api-key", ADMIN),
        )
        trace = await http.options(
            "/integration/settings", headers=preflight("TRACE", "x-service-api-key", ADMIN)
        )
        settings = await http.put(
            "/integration/settings",
            json={"ownerAddress": owner.address, "webhookApiKeyHeader": False},
            headers={**key_headers(key), "origin": ADMIN},
        )

    assert put.status_code == 204
    assert put.headers["access-control-allow-origin"] == ADMIN
    assert "PUT" in put.headers["access-control-allow-methods"].split(", ")
    assert patch.status_code == 204
    assert "PATCH" in patch.headers["access-control-allow-methods"].split(", ")
    assert trace.status_code == 405
    assert "access-control-allow-origin" not in trace.headers
    assert settings.status_code == 200
    assert settings.headers["access-control-allow-origin"] == ADMIN


@pytest.mark.parametrize("value", ["shop.example", "https://shop.example/path", "ftp://x"])
def test_a_bad_origin_setting_is_refused_at_start(value: str) -> None:
    with pytest.raises(ValueError, match="not an origin"):
        Settings(environment="development", cors_allow_origins=value)
