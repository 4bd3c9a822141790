"""/readyz repeats the cheap start-up checks; /metrics can require a bearer token."""

from __future__ import annotations

from httpx import AsyncClient

from invoicing.chain.deploy import DevDeployment
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.server import serve

METRICS_TOKEN = "metrics-token-" + "k" * 20


async def readyz(make_services: MakeServices, **chain: object) -> tuple[int, dict[str, object]]:
    services = await make_services(chain=chain)
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        response = await http.get("/readyz")
    return response.status_code, response.json()


async def test_readyz_is_ready_on_the_configured_chain(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    status, body = await readyz(make_services)

    assert status == 200
    assert body == {"ready": True, "checks": {"database": "ok", f"chain:{dev.chain_id}": "ok"}}


async def test_readyz_reports_a_node_on_another_chain(make_services: MakeServices) -> None:
    status, body = await readyz(make_services, chain_id=8453)

    assert status == 503
    assert body["ready"] is False
    assert body["checks"] == {
        "database": "ok",
        "chain:8453": "error: wrong_chain_id (node reports 31337)",
    }


async def test_readyz_reports_a_factory_address_without_code(make_services: MakeServices) -> None:
    status, body = await readyz(make_services, factory="0x" + "ab" * 20)

    assert status == 503
    assert body["checks"]["chain:31337"] == "error: no_factory_code"  # type: ignore[index]


async def test_metrics_without_a_token_configured_are_open(make_services: MakeServices) -> None:
    services = await make_services()
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        response = await http.get("/metrics")

    assert response.status_code == 200 and "python_info" in response.text


async def test_metrics_with_a_token_need_it_as_a_bearer_token(
    make_services: MakeServices,
) -> None:
    services = await make_services(metrics_token=METRICS_TOKEN)
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        missing = await http.get("/metrics")
        wrong = await http.get("/metrics", headers={"Authorization": "Bearer nope"})
        raw = await http.get("/metrics", headers={"Authorization": METRICS_TOKEN})
        right = await http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})

    for refused in (missing, wrong, raw):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["www-authenticate"] == 'Bearer realm="metrics"'
        assert METRICS_TOKEN not in refused.text
    assert right.status_code == 200 and "python_info" in right.text
