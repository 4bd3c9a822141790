"""The cost of owner actions over real HTTP: redeliveries and test pings queue deliveries the
worker sends, so each owner gets a few an hour; past that the answer is 429 ``rate_limited``
in the documented error shape and nothing is queued. Other owners keep their own counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.services import Services
from invoicing.tables.notifications import Event, WebhookEvent
from invoicing.web.app import create_app
from tests.support.api import issue_api_key, key_headers
from tests.support.monitoring import clock_of, fake_services, new_fake_chain
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

ENDPOINTS = "/integration/webhook-endpoints"
HOUR_MS = 3_600_000
PINGS, REDELIVERIES = 2, 3


class Api:
    def __init__(self, services: Services, http: httpx.AsyncClient) -> None:
        self.services = services
        self.http = http

    async def owner(self) -> tuple[LocalAccount, dict[str, str], str]:
        """A new owner, its API key's headers and one endpoint of it."""
        owner = new_owner()
        headers = key_headers(await issue_api_key(self.services, owner))
        body = {"ownerAddress": owner.address, "url": "http://127.0.0.1:1/h", "events": ["*"]}
        created = await self.http.post(ENDPOINTS, json=body, headers=headers)
        assert created.status_code == 201, created.text
        return owner, headers, created.json()["id"]

    async def ping(self, owner: LocalAccount, headers: dict[str, str], endpoint: str) -> Any:
        return await self.http.post(
            f"{ENDPOINTS}/test",
            params={"id": endpoint},
            json={"ownerAddress": owner.address},
            headers=headers,
        )

    async def redeliver(
        self, owner: LocalAccount, headers: dict[str, str], event: str, endpoint: str
    ) -> Any:
        return await self.http.post(
            f"/integration/events/{event}/redeliver",
            json={"ownerAddress": owner.address, "endpointId": endpoint},
            headers=headers,
        )

    async def queued(self, owner: LocalAccount) -> tuple[int, int]:
        """(events, deliveries) of the owner."""
        owner_key = owner.address.lower()
        async with self.services.db.sessions() as session:
            events = await session.scalar(
                select(func.count()).select_from(Event).where(Event.owner_key == owner_key)
            )
            deliveries = await session.scalar(
                select(func.count())
                .select_from(WebhookEvent)
                .where(WebhookEvent.owner_key == owner_key)
            )
        return int(events or 0), int(deliveries or 0)


@pytest.fixture
async def api(own_database: str) -> AsyncIterator[Api]:
    services = fake_services(
        own_database,
        new_fake_chain(),
        webhook_allow_private=True,
        webhook_test_per_hour=PINGS,
        event_redelivery_per_hour=REDELIVERIES,
    )
    clock_of(services).set(10 * HOUR_MS + 1000)  # one second into an hour's window
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield Api(services, http)
    await services.db.dispose()


def refused(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"]["code"] == "rate_limited"
    assert set(answer.json()["error"]) == {"code", "message", "details"}
    assert answer.headers["retry-after"] == str(3600 - 1)


async def test_test_pings_per_owner_and_hour(api: Api) -> None:
    owner, headers, endpoint = await api.owner()
    for _ in range(PINGS):
        assert (await api.ping(owner, headers, endpoint)).status_code == 202
    before = await api.queued(owner)

    refused(await api.ping(owner, headers, endpoint))

    assert await api.queued(owner) == before == (PINGS, PINGS)  # nothing queued
    other, other_headers, other_endpoint = await api.owner()
    assert (await api.ping(other, other_headers, other_endpoint)).status_code == 202
    clock_of(api.services).advance(HOUR_MS)  # the next hour
    assert (await api.ping(owner, headers, endpoint)).status_code == 202
    assert await api.queued(owner) == (PINGS + 1, PINGS + 1)


async def test_redeliveries_per_owner_and_hour(api: Api) -> None:
    owner, headers, endpoint = await api.owner()
    event = (await api.ping(owner, headers, endpoint)).json()["eventId"]
    for _ in range(REDELIVERIES):
        assert (await api.redeliver(owner, headers, event, endpoint)).status_code == 202
    before = await api.queued(owner)

    refused(await api.redeliver(owner, headers, event, endpoint))

    assert await api.queued(owner) == before == (1, 1 + REDELIVERIES)  # nothing queued
    other, other_headers, other_endpoint = await api.owner()
    other_event = (await api.ping(other, other_headers, other_endpoint)).json()["eventId"]
    answer = await api.redeliver(other, other_headers, other_event, other_endpoint)
    assert answer.status_code == 202
    clock_of(api.services).advance(HOUR_MS)
    assert (await api.redeliver(owner, headers, event, endpoint)).status_code == 202
    assert await api.queued(owner) == (1, 2 + REDELIVERIES)
