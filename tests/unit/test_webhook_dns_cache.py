"""The webhook client's DNS cache (``resolver.CachedResolver``): one lookup per name and TTL,
shared by concurrent deliveries, failures kept only for their own TTL, and every kept answer
still checked by the SSRF guard (a name re-pointed to a private address is refused once its
answer expires, and nothing connects there)."""

from __future__ import annotations

import asyncio

import pytest

from invoicing.notifications.client import Delivery, HttpWebhookClient
from invoicing.outbound.http11 import ConnectionPool, Streams
from invoicing.outbound.resolver import CachedResolver, SystemResolver
from tests.support.local_http import Connects, LocalServer

BODY = b'{"status":"paid"}'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """A resolver that answers from a list (the last answer repeats) and counts lookups."""

    def __init__(self, *answers: list[str] | Exception) -> None:
        self.answers = list(answers)
        self.lookups: list[tuple[str, int]] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_a_name_is_looked_up_once_until_its_answer_expires() -> None:
    clock, answers = Clock(), Answers(["93.184.216.34"], ["93.184.216.35"])
    resolver = CachedResolver(answers, ttl_s=10, clock=clock)

    first = [await resolver("hooks.example", 443) for _ in range(3)]
    clock.now += 9.9
    still = await resolver("hooks.example", 443)
    other_port = await resolver("hooks.example", 8443)
    clock.now += 0.1
    renewed = await resolver("hooks.example", 443)

    assert first == [["93.184.216.34"]] * 3
    assert still == ["93.184.216.34"]
    assert other_port == ["93.184.216.35"]
    assert renewed == ["93.184.216.35"]
    assert answers.lookups == [("hooks.example", 443), ("hooks.example", 8443)] + [
        ("hooks.example", 443)
    ]


async def test_concurrent_lookups_of_one_name_share_one() -> None:
    answers = Answers(["93.184.216.34"])
    answers.gate = asyncio.Event()
    resolver = CachedResolver(answers, ttl_s=10, clock=Clock())

    waiting = [asyncio.ensure_future(resolver("hooks.example", 443)) for _ in range(50)]
    await asyncio.sleep(0)
    answers.gate.set()

    assert await asyncio.gather(*waiting) == [["93.184.216.34"]] * 50
    assert answers.lookups == [("hooks.example", 443)]


async def test_a_failed_lookup_is_not_kept() -> None:
    answers = Answers(OSError("Temporary failure in name resolution"), ["93.184.216.34"])
    resolver = CachedResolver(answers, ttl_s=10, clock=Clock())

    with pytest.raises(OSError, match="Temporary failure"):
        await resolver("hooks.example", 443)
    assert await resolver("hooks.example", 443) == ["93.184.216.34"]
    assert len(answers.lookups) == 2


async def test_a_failed_lookup_is_kept_for_its_own_ttl_then_looked_up_again() -> None:
    clock = Clock()
    answers = Answers(TimeoutError("no answer within 5 s"), ["93.184.216.34"])
    resolver = CachedResolver(answers, ttl_s=10, clock=clock, failure_ttl_s=30)

    with pytest.raises(TimeoutError, match="no answer within 5 s"):
        await resolver("hooks.example", 443)
    clock.now += 29.9
    with pytest.raises(ConnectionError) as kept:
        await resolver("hooks.example", 443)
    clock.now += 0.1

    assert str(kept.value) == ("TimeoutError: no answer within 5 s (a failed lookup, kept 30 s)")
    assert await resolver("hooks.example", 443) == ["93.184.216.34"]
    assert len(answers.lookups) == 2


async def test_at_most_max_names_are_kept_the_oldest_goes_first() -> None:
    answers = Answers(["93.184.216.34"])
    resolver = CachedResolver(answers, ttl_s=10, clock=Clock(), max_names=2)

    for host in ["a.example", "b.example", "c.example", "c.example", "a.example"]:
        await resolver(host, 443)

    assert [host for host, _ in answers.lookups] == ["a.example", "b.example", "c.example"] + [
        "a.example"
    ]
    assert len(resolver._answers) == 2


async def test_a_name_re_pointed_to_a_private_address_is_refused_once_its_answer_expires(
    server: LocalServer,
) -> None:
    # DNS rebinding: the name first answers a public address, then loopback. The kept
    # answer is the checked one (pinned for the connection); the new answer is checked too.
    clock = Clock()
    answers = Answers(["93.184.216.34"], ["127.0.0.1"])
    connects: Connects = []

    async def connect(address: str, port: int, tls_name: str | None) -> Streams:
        connects.append((address, port, tls_name))
        return await asyncio.open_connection("127.0.0.1", server.port)

    client = HttpWebhookClient(
        resolver=CachedResolver(answers, ttl_s=10, clock=clock), wire=ConnectionPool(connect)
    )
    delivered = [await client.send(Delivery("http://hooks.example/", BODY, {})) for _ in range(2)]
    clock.now += 10
    rebound = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert [o.status_code for o in delivered] == [204, 204]
    assert (rebound.status_code, rebound.error, rebound.terminal) == (
        None,
        "refused: destination not allowed",
        True,
    )
    assert connects == [("93.184.216.34", 80, None)]  # one kept-alive connection, never loopback
    assert len(server.requests) == 2
    assert len(answers.lookups) == 2
    await client.aclose()


async def test_the_client_keeps_answers_only_when_told_to() -> None:
    plain = HttpWebhookClient()
    assert plain.resolver is plain._lookups
    assert isinstance(plain.resolver, SystemResolver)
    client = HttpWebhookClient(dns_cache_s=5, dns_failure_cache_s=7)
    cached = client._lookups
    assert isinstance(cached, CachedResolver)
    assert (cached.resolver, cached.ttl_s, cached.failure_ttl_s) == (client.resolver, 5, 7)
    await plain.aclose()
    await client.aclose()


@pytest.mark.parametrize("host", ["127.0.0.1", "93.184.216.34", "::1", "2606:4700:4700::1111"])
async def test_the_system_resolver_answers_an_ip_literal_itself(host: str) -> None:
    def no_lookup(host: str, port: int) -> list[str]:
        raise AssertionError("an IP literal needs no lookup")

    resolver = SystemResolver(no_lookup)
    assert await resolver(host, 443) == [host]
    assert resolver.busy == 0
    resolver.close()
