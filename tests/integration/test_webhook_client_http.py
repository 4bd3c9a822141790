"""The webhook client against a real HTTP server (uvicorn, ``tests/support/receiver.py``):
what it sends, the fallback across resolved addresses, and idle connections the server
closes. Name resolution is the client's injectable step (``hooks.test`` is not in DNS);
the connects and the sockets are real."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest

from invoicing import __version__
from invoicing.notifications.client import Delivery, HttpWebhookClient
from invoicing.outbound.guard import Resolver
from tests.support.receiver import receiver

pytestmark = pytest.mark.integration

BODY = b'{"status":"paid"}'


def resolving_to(*addresses: str) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def hooks_url(base_url: str) -> Callable[[str], str]:
    """URLs on the receiver's port under the host name ``hooks.test``."""
    port = urlsplit(base_url).port
    return lambda path: f"http://hooks.test:{port}/{path}"


async def test_deliveries_carry_the_user_agent_and_the_url_host() -> None:
    async with receiver() as recv:
        url = hooks_url(recv.base_url)
        client = HttpWebhookClient(allow_private=True, resolver=resolving_to("127.0.0.1"))

        outcome = await client.send(Delivery(url("paid"), BODY, {"x-service-event-id": "e1"}))
        await client.aclose()

    assert outcome.status_code == 200
    (request,) = recv.at("paid")
    assert request.headers["user-agent"] == f"invoicing-webhooks/{__version__}"
    assert request.headers["host"] == urlsplit(url("paid")).netloc
    assert request.headers["x-service-event-id"] == "e1"


async def test_an_address_that_refuses_is_skipped_for_the_next() -> None:
    async with receiver() as recv:
        url = hooks_url(recv.base_url)
        # the receiver listens on 127.0.0.1 only: 127.0.0.2 refuses the connection
        client = HttpWebhookClient(
            allow_private=True, resolver=resolving_to("127.0.0.2", "127.0.0.1")
        )

        outcomes = [await client.send(Delivery(url("paid"), BODY, {})) for _ in range(2)]
        await client.aclose()

    assert [o.status_code for o in outcomes] == [200, 200]
    assert len(recv.at("paid")) == 2


async def test_a_delivery_after_the_server_closed_the_idle_connection_arrives_once() -> None:
    async with receiver(keep_alive_s=0.2) as recv:
        url = hooks_url(recv.base_url)
        client = HttpWebhookClient(allow_private=True, resolver=resolving_to("127.0.0.1"))

        first = await client.send(Delivery(url("a"), BODY, {"x-service-event-id": "e1"}))
        await asyncio.sleep(0.6)  # the server closes the idle connection
        second = await client.send(Delivery(url("a"), BODY, {"x-service-event-id": "e2"}))
        await client.aclose()

    assert (first.status_code, second.status_code) == (200, 200)
    assert [r.headers["x-service-event-id"] for r in recv.at("a")] == ["e1", "e2"]
