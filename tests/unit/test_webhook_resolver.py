"""Webhook name lookups on threads of their own (``resolver.SystemResolver``): a name server
that never answers holds only those threads, never the event loop's default executor (the
RPC client's lookups and the SQLite writer use it); with every thread busy a delivery fails
at once, to be retried; a failed lookup is kept, a busy resolver is not.

The blocking lookup is the resolver's injectable step; here it waits on an event that the
test sets only at the end, as a name server that never answers would.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator

import pytest

from invoicing.notifications.client import Delivery, HttpWebhookClient, Outcome
from invoicing.outbound.resolver import SystemResolver

BODY = b'{"type":"invoice.created"}'


class NeverAnswers:
    """A blocking lookup that waits until ``answer`` is set, then fails as a name server
    that timed out; it records the names it was asked."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host.split(".")[0])
        self.answer.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")


@pytest.fixture
async def dead() -> AsyncIterator[NeverAnswers]:
    lookup = NeverAnswers()
    yield lookup
    lookup.answer.set()  # the blocked threads end; nothing else waits on them


def delivery(name: str) -> Delivery:
    return Delivery(f"https://{name}.dead.example/hooks", BODY, {}, "0x" + "aa" * 20)


async def send_all(client: HttpWebhookClient, names: list[str]) -> list[Outcome]:
    return list(await asyncio.gather(*(client.send(delivery(n)) for n in names)))


async def test_lookups_that_never_answer_do_not_delay_the_loops_default_executor(
    dead: NeverAnswers,
) -> None:
    resolver = SystemResolver(dead, threads=2, timeout_s=0.3)
    client = HttpWebhookClient(resolver=resolver, dns_failure_cache_s=30)
    loop = asyncio.get_running_loop()

    sending = asyncio.ensure_future(send_all(client, [f"h{i}" for i in range(16)]))
    await asyncio.sleep(0.05)  # every delivery is looking its name up
    started = time.monotonic()
    answer = await asyncio.wait_for(loop.run_in_executor(None, lambda: 42), 5)
    waited_s = time.monotonic() - started
    outcomes = await sending

    assert answer == 42 and waited_s < 0.25  # not behind the lookups (each waits 0.3 s)
    assert dead.asked == ["h0", "h1"]  # the resolver's 2 threads, nothing more
    timed_out, busy = outcomes[:2], outcomes[2:]
    assert [o.error for o in timed_out] == [
        f"ConnectionError: cannot resolve h{i}.dead.example: no answer within 0.3 s"
        for i in range(2)
    ]
    assert {o.error for o in busy} == {
        f"ConnectionError: cannot resolve h{i}.dead.example: all 2 name lookup threads are busy"
        for i in range(2, 16)
    }
    assert all((o.kind, o.terminal) == ("connect_error", False) for o in outcomes)  # retried
    assert max(o.duration_ms for o in busy) < 100  # failed at once, not queued
    await client.aclose()


async def test_a_failed_lookup_is_kept_and_a_busy_resolver_is_not(dead: NeverAnswers) -> None:
    resolver = SystemResolver(dead, threads=1, timeout_s=0.2)
    client = HttpWebhookClient(resolver=resolver, dns_failure_cache_s=30)

    first = await send_all(client, ["h0", "h1"])  # h0 takes the thread, h1 finds it busy
    again = await send_all(client, ["h0", "h0", "h1"])

    assert [o.error for o in first] == [
        "ConnectionError: cannot resolve h0.dead.example: no answer within 0.2 s",
        "ConnectionError: cannot resolve h1.dead.example: all 1 name lookup threads are busy",
    ]
    assert [o.error for o in again] == [
        "ConnectionError: cannot resolve h0.dead.example: TimeoutError: no answer within 0.2 s"
        " (a failed lookup, kept 30 s)",
    ] * 2 + [
        "ConnectionError: cannot resolve h1.dead.example: all 1 name lookup threads are busy",
    ]
    assert max(o.duration_ms for o in again) < 100
    assert dead.asked == ["h0"]  # h0 kept as failed; the thread is still blocked on it
    assert resolver.busy == 1

    dead.answer.set()  # the name server's answer comes at last: the thread is free again
    for _ in range(200):
        if resolver.busy == 0:
            break
        await asyncio.sleep(0.01)
    retried = await client.send(delivery("h1"))  # h1 was not kept: looked up now

    assert retried.error == (
        "ConnectionError: cannot resolve h1.dead.example: "
        "[Errno -3] Temporary failure in name resolution"
    )
    assert dead.asked == ["h0", "h1"]
    await client.aclose()


async def test_a_worker_client_looks_names_up_on_its_own_threads() -> None:
    client = HttpWebhookClient(dns_threads=3, dns_timeout_s=4)
    resolver = client.resolver

    assert isinstance(resolver, SystemResolver)
    assert (resolver.threads, resolver.timeout_s) == (3, 4)
    await client.aclose()
