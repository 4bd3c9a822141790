"""The bounds on kept-alive webhook connections (``http11.PoolBounds``): a receiver that
never closes its connections, and an owner who keeps moving its endpoints to new addresses,
cannot make the worker hold an unbounded number of sockets.

A real local receiver that keeps every connection open (``tests/support/local_http.py``);
the client's injectable resolver and connect step lead each "public" address to it, and
the test counts the connections it holds open and this process's file descriptors.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from invoicing.notifications.client import Delivery, HttpWebhookClient
from invoicing.outbound.http11 import ConnectionPool, PoolBounds, Streams
from tests.support.local_http import Connects, LocalServer

BODY = b'{"type":"invoice.created"}'
A_OWNER, B_OWNER = "0x" + "aa" * 20, "0x" + "bb" * 20


class Moves:
    """A resolver: ``hook-<i>.example`` answers a public address that changes with each
    ``move`` (an owner re-pointing its endpoints between bursts)."""

    def __init__(self) -> None:
        self.moves = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        endpoint = int(host.split(".")[0].removeprefix("hook-"))
        return [f"93.184.{self.moves}.{endpoint + 1}"]


def client_of(
    server: LocalServer,
    resolver: Moves,
    bounds: PoolBounds,
    connects: Connects | None = None,
    clock: Callable[[], float] | None = None,
) -> tuple[HttpWebhookClient, ConnectionPool]:
    async def connect(address: str, port: int, tls_name: str | None) -> Streams:
        if connects is not None:
            connects.append((address, port, tls_name))
        return await asyncio.open_connection("127.0.0.1", server.port)

    pool = ConnectionPool(connect, bounds=bounds, clock=clock or time.monotonic)
    return HttpWebhookClient(resolver=resolver, wire=pool), pool


def delivery(endpoint: int, owner: str = A_OWNER) -> Delivery:
    return Delivery(f"http://hook-{endpoint}.example/events", BODY, {}, owner)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def settled(check: Callable[[], bool]) -> None:
    """Wait (at most 2 s) until the receiver has seen the client's closes."""
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)


async def test_an_owner_moving_16_endpoints_8_times_holds_at_most_its_bound_of_connections(
    server: LocalServer,
) -> None:
    # The finding: 16 endpoints moved to new addresses between bursts, a receiver that never
    # closes. Without bounds every move left 16 more sockets open (128 after 8 moves).
    resolver = Moves()
    client, pool = client_of(server, resolver, PoolBounds())  # the defaults: 64 per owner
    before = open_descriptors()

    for move in range(8):
        resolver.moves = move
        outcomes = [await client.send(delivery(i)) for i in range(16)]
        assert [o.status_code for o in outcomes] == [204] * 16

    await settled(lambda: server.open == 64)
    assert server.connections == 128
    assert (server.open, pool.idle) == (64, 64)
    # Both ends live in this process (sockets of earlier tests may close meanwhile).
    assert open_descriptors() - before <= 2 * 64
    await client.aclose()
    await settled(lambda: server.open == 0)
    assert (server.open, pool.idle) == (0, 0)


async def test_past_the_pool_bound_the_least_recently_used_connections_are_closed_first(
    server: LocalServer,
) -> None:
    connects: Connects = []
    bounds = PoolBounds(max_idle=6, max_idle_per_owner=4)
    client, pool = client_of(server, Moves(), bounds, connects)

    for endpoint in range(4):
        await client.send(delivery(endpoint, A_OWNER))
    for endpoint in range(4, 8):
        await client.send(delivery(endpoint, B_OWNER))
    await settled(lambda: server.open == 6)
    assert (server.open, pool.idle) == (6, 6)  # A's two least recently used were closed

    await client.send(delivery(2, A_OWNER))  # still kept: reused
    await client.send(delivery(0, A_OWNER))  # closed: a new connection
    assert [address for address, _, _ in connects[8:]] == ["93.184.0.1"]
    await client.aclose()


async def test_one_owner_keeps_at_most_its_bound_and_leaves_the_others_connections(
    server: LocalServer,
) -> None:
    connects: Connects = []
    client, pool = client_of(server, Moves(), PoolBounds(max_idle_per_owner=3), connects)

    await client.send(delivery(0, B_OWNER))
    for endpoint in range(1, 11):
        await client.send(delivery(endpoint, A_OWNER))
    await settled(lambda: server.open == 4)
    assert (server.open, pool.idle) == (4, 4)  # A's last 3, and B's one

    await client.send(delivery(0, B_OWNER))  # B's connection was not closed for A's
    assert len(connects) == 11
    await client.aclose()


async def test_idle_connections_are_closed_after_the_idle_timeout_when_nothing_is_sent(
    server: LocalServer,
) -> None:
    client, pool = client_of(server, Moves(), PoolBounds(idle_s=0.2))

    for endpoint in range(3):
        await client.send(delivery(endpoint))
    await settled(lambda: server.open == 3)
    assert (server.open, pool.idle) == (3, 3)
    await asyncio.sleep(0.3)  # nothing is sent meanwhile
    await settled(lambda: server.open == 0)

    assert (server.open, pool.idle) == (0, 0)
    await client.aclose()


async def test_a_connection_idle_past_the_timeout_is_never_reused(server: LocalServer) -> None:
    now = [1000.0]
    client, pool = client_of(server, Moves(), PoolBounds(idle_s=30), clock=lambda: now[0])

    await client.send(delivery(0))
    now[0] += 29.9
    await client.send(delivery(0))  # reused
    now[0] += 30
    await client.send(delivery(0))  # idle for 30 s: closed, and a new one opened

    await settled(lambda: server.open == 1)
    assert (server.connections, server.open, pool.idle) == (2, 1, 1)
    await client.aclose()
