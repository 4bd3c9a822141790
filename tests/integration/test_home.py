"""``GET /`` says what answers there and where its parts are; no API reference page (Swagger
UI, ReDoc) is served, in development or production: the reference is ``/openapi.json``
(docs/reference/api.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from httpx import AsyncClient

from invoicing import __version__
from invoicing.chain.chains import ChainRegistry
from invoicing.db import Database
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.web.app import create_app
from tests.support.server import serve

pytestmark = pytest.mark.integration


OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


@pytest.fixture(params=["development", "production"])
async def http(database_url: str, request: pytest.FixtureRequest) -> AsyncIterator[AsyncClient]:
    settings = Settings(environment=request.param, secret="s" * 40, database_url=database_url)
    services = Services(settings=settings, db=Database(database_url), chains=ChainRegistry({}))
    app = create_app(services, run_workers_in_process=False)
    async with serve(app) as base_url, AsyncClient(base_url=base_url) as client:
        yield client
    await services.aclose()


async def test_the_root_names_the_service_and_its_parts(http: AsyncClient) -> None:
    response = await http.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "service": "invoicing",
        "version": __version__,
        "openapi": "/openapi.json",
        "health": "/healthz",
        "readiness": "/readyz",
        "paymentPage": "/pay/{paymentAddress}",
    }
    for part in ("openapi", "health", "readiness"):
        assert (await http.get(response.json()[part])).status_code == 200


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
async def test_no_api_reference_page_is_served(http: AsyncClient, path: str) -> None:
    response = await http.get(path)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "cdn" not in response.text.lower()


async def test_the_reference_is_the_committed_document(http: AsyncClient) -> None:
    response = await http.get("/openapi.json")

    assert response.status_code == 200
    assert response.json() == json.loads(OPENAPI.read_text())
