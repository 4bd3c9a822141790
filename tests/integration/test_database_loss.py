"""PostgreSQL going away: requests answer 503 ``database_unavailable`` (never 500) and change
nothing; once it is back the same processes answer again with no restart, and a pooled
connection the server closed meanwhile is never handed out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from invoicing.db import Database
from invoicing.web.app import create_app
from tests.conftest import TEST_DATABASE, MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.tcp_proxy import TcpProxy, tcp_proxy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not TEST_DATABASE.startswith("postgres"),
        reason="cuts a TCP connection to the database: PostgreSQL only",
    ),
]


@pytest.fixture
def db_proxy(database_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A TcpProxy to the test database and the database URL through it."""
    url = make_url(database_url)
    with tcp_proxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(False)
        yield proxy, through


async def test_requests_answer_503_while_the_database_is_cut_and_200_after(
    make_services: MakeServices, db_proxy: tuple[TcpProxy, str]
) -> None:
    proxy, url = db_proxy
    services = await make_services(database_url=url)
    owner = new_owner()
    headers = key_headers(await issue_api_key(services, owner))
    body = {"ownerAddress": owner.address, "chainId": 31337, "amount": "1", "invoiceId": "cut-1"}
    query = {"ownerAddress": owner.address}
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        assert (
            await http.get("/integration/invoices", params=query, headers=headers)
        ).status_code == 200

        proxy.cut()
        created = await http.post("/integration/invoices", json=body, headers=headers)
        listed = await http.get("/integration/invoices", params=query, headers=headers)
        alive = await http.get("/healthz")
        proxy.restore()
        listed_after = await http.get("/integration/invoices", params=query, headers=headers)
        created_after = await http.post("/integration/invoices", json=body, headers=headers)

    for refused in (created, listed):
        assert refused.status_code == 503
        assert refused.json() == {
            "error": {
                "code": "database_unavailable",
                "message": "the database is unavailable; retry later",
            }
        }
    assert alive.status_code == 200
    assert listed_after.status_code == 200 and listed_after.json()["total"] == 0
    assert created_after.status_code == 201  # the refused create had written nothing


async def test_a_connection_the_server_closed_is_not_handed_out_again(
    db_proxy: tuple[TcpProxy, str],
) -> None:
    proxy, url = db_proxy
    db = Database(url)
    try:
        async with db.sessions() as session:
            assert await session.scalar(text("SELECT 1")) == 1  # one connection, now pooled
        proxy.cut()  # the pooled connection is reset with nothing using it
        await asyncio.sleep(0.2)
        proxy.restore()

        async with db.sessions() as session:
            answer = await session.scalar(text("SELECT 2"))
    finally:
        await db.dispose()

    assert answer == 2
    assert proxy.accepted == 2  # a new connection replaced the closed one
