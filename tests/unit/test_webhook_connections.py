"""The webhook client's connections: keep-alive reuse, every checked address tried in order,
stale keep-alive connections, and the User-Agent it sends.

Real sockets to a local server (``tests/support/local_http.py``); the resolver and the connect
step are the client's injectable ones, so "public" addresses lead to that server.
"""

from __future__ import annotations

import asyncio

import pytest

from invoicing import __version__
from invoicing.notifications.client import Delivery
from tests.support.local_http import Connects, LocalServer, make_client

BODY = b'{"status":"paid"}'
URL = "http://hooks.example/paid"
V4, V6 = "93.184.216.34", "2606:4700:4700::1111"


def delivery(event_id: str = "e1") -> Delivery:
    return Delivery(URL, BODY, {"x-service-event-id": event_id})


async def test_the_user_agent_names_the_service_and_its_version(server: LocalServer) -> None:
    client = make_client(server, V4)

    await client.send(delivery())

    (request,) = server.requests
    assert f"\r\nuser-agent: invoicing-webhooks/{__version__}\r\n".encode() in request
    await client.aclose()


async def test_connections_are_reused(server: LocalServer) -> None:
    client = make_client(server, V4)

    outcomes = [await client.send(delivery()) for _ in range(5)]

    assert [o.status_code for o in outcomes] == [204] * 5
    assert server.connections == 1
    await client.aclose()


async def test_a_refused_address_is_skipped_for_the_next(server: LocalServer) -> None:
    connects: Connects = []
    client = make_client(server, V4, V6, connects=connects, refused={V4})

    first = await client.send(delivery())
    second = await client.send(delivery())

    assert (first.status_code, second.status_code) == (204, 204)
    # the second delivery reuses the connection to the address that accepted
    assert connects == [(V4, 80, None), (V6, 80, None)]
    assert len(server.requests) == 2
    await client.aclose()


async def test_a_silent_address_is_given_up_after_the_fallback_timeout(
    server: LocalServer,
) -> None:
    connects: Connects = []
    client = make_client(
        server, V6, V4, connects=connects, silent={V6}, fallback_connect_timeout_s=0.05
    )

    outcome = await client.send(delivery())

    assert (outcome.status_code, outcome.error) == (204, None)
    assert connects == [(V6, 80, None), (V4, 80, None)]
    assert 50 <= outcome.duration_ms < 1000
    await client.aclose()


async def test_when_no_address_connects_the_attempt_fails_with_every_reason(
    server: LocalServer,
) -> None:
    connects: Connects = []
    client = make_client(server, V4, V6, connects=connects, refused={V4, V6})

    outcome = await client.send(delivery())

    assert (outcome.status_code, outcome.terminal) == (None, False)
    assert outcome.error == (
        "ConnectionError: no address of hooks.example connects ("
        f"{V4}: ConnectionRefusedError: [Errno 111] Connection refused; "
        f"{V6}: ConnectionRefusedError: [Errno 111] Connection refused)"
    )
    assert connects == [(V4, 80, None), (V6, 80, None)] and server.requests == []
    await client.aclose()


async def test_one_non_global_address_refuses_the_delivery_even_after_a_good_one(
    server: LocalServer,
) -> None:
    connects: Connects = []
    client = make_client(server, V4, "10.0.0.7", connects=connects)

    outcome = await client.send(delivery())

    assert outcome.terminal is True
    assert outcome.error == "refused: destination not allowed"  # not the internal address
    assert connects == [] and server.requests == []
    await client.aclose()


async def test_after_the_endpoint_closed_an_idle_connection_the_post_goes_on_a_new_one(
    server: LocalServer,
) -> None:
    server.answers_per_connection = 1  # then the endpoint closes it (an idle timeout)
    client = make_client(server, V4)

    first = await client.send(delivery("e1"))
    await asyncio.sleep(0.05)  # the end of stream reaches the client's idle connection
    second = await client.send(delivery("e2"))

    assert (first.status_code, second.status_code) == (204, 204)
    assert server.connections == 2
    assert [b"e2" in r for r in server.requests] == [False, True]  # sent once
    await client.aclose()


async def test_a_post_on_a_reused_connection_closed_before_any_answer_is_sent_once_more(
    server: LocalServer,
) -> None:
    # the endpoint takes the second request on a connection and closes without a byte
    server.answers_per_connection, server.then = 1, b""
    client = make_client(server, V4)

    first = await client.send(delivery("e1"))
    second = await client.send(delivery("e2"))

    assert (first.status_code, second.status_code, second.error) == (204, 204, None)
    assert server.connections == 2
    assert [b"e2" in r for r in server.requests] == [False, True, True]
    await client.aclose()


async def test_a_post_is_not_sent_again_once_an_answer_byte_was_read(server: LocalServer) -> None:
    server.answers_per_connection, server.then = 1, b"HTTP/1.1 2"
    client = make_client(server, V4)

    await client.send(delivery("e1"))
    second = await client.send(delivery("e2"))

    assert (second.status_code, second.terminal) == (None, False)
    assert second.error == (
        "IncompleteReadError: 10 bytes read on a total of undefined expected bytes"
    )
    assert server.connections == 1
    assert [b"e2" in r for r in server.requests] == [False, True]
    await client.aclose()


@pytest.mark.parametrize("then", [b"", b"HTTP/1.1 2"])
async def test_a_post_on_a_new_connection_is_never_sent_again(
    server: LocalServer, then: bytes
) -> None:
    server.answers_per_connection, server.then = 0, then
    client = make_client(server, V4)

    outcome = await client.send(delivery())

    assert (outcome.status_code, outcome.terminal) == (None, False)
    assert outcome.error is not None and outcome.error.startswith("IncompleteReadError")
    assert server.connections == 1 and len(server.requests) == 1
    await client.aclose()
