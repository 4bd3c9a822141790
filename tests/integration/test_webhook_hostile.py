"""Hostile webhook receivers against the real worker, the real client and a real database: an
answer the service cannot parse or store is a failed attempt with a reason, and every other
owner's webhook is still delivered, once, by the same worker run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import delete, select

from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications.client import FakeWebhookClient, HttpWebhookClient, Outcome
from invoicing.notifications.worker import Dispatcher
from invoicing.services import Services
from invoicing.tables.notifications import WebhookAttempt, WebhookEvent
from tests.support.monitoring import clock_of, events_of, fake_services, new_invoice

pytestmark = pytest.mark.integration

ETH = 10**18

# What a hostile receiver answers, by path, and the reason its attempt is recorded with.
ANSWERS = {
    "/twenty-digits": (
        b"HTTP/1.1 99999999999999999999 OK\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: the status code is not three digits",
    ),
    "/four-digits": (
        b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: the status code is not three digits",
    ),
    "/no-status": (
        b"HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: not an HTTP/1.x status line: 'HTTP/1.1 OK'",
    ),
    "/huge-status-line": (
        b"HTTP/1.1 200 " + b"O" * 20_000 + b"\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: the status line is longer than 1024 bytes",
    ),
    "/huge-headers": (
        b"HTTP/1.1 200 OK\r\n"
        + b"X-Pad: "
        + b"p" * 1000
        + b"\r\n" * 1
        + b"X-Pad: q\r\n" * 40
        + b"X-Big: "
        + b"b" * 20_000
        + b"\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: the answer's headers are longer than 16384 bytes",
    ),
    "/endless-interim": (
        b"HTTP/1.1 100 Continue\r\n\r\n" * 50 + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        "ProtocolError: more than 8 interim (1xx) answers",
    ),
}


@dataclass
class HostileServer:
    """Answers each POST from ``ANSWERS`` by its path (anything else: 204); counts requests."""

    port: int = 0
    requests: list[str] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = next(
                    int(line.split(":")[1])
                    for line in lines
                    if line.lower().startswith("content-length")
                )
                await reader.readexactly(length)
                self.requests.append(path)
                answer = ANSWERS.get(path, (b"HTTP/1.1 204 No Content\r\n\r\n", ""))[0]
                writer.write(answer)
                await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def hostile_server() -> AsyncIterator[HostileServer]:
    hostile = HostileServer()
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", 0)
    hostile.port = server.sockets[0].getsockname()[1]
    async with server:
        yield hostile


def local_client(timeout_s: float = 5.0) -> HttpWebhookClient:
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    return HttpWebhookClient(timeout_s=timeout_s, allow_private=True, resolver=resolve)


@pytest.fixture
async def services(own_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(own_database, fake, webhook_max_attempts=1)
    yield built
    await built.db.dispose()


async def paid(services: Services, fake: FakeChain, url: str) -> str:
    invoice = await new_invoice(services, fake, webhook_url=url)
    fake.pay(invoice.payment_address, ETH)
    await run_block_pass(services, fake, await fake.block_number())  # reads every pending one
    await run_records_step(services, fake, await fake.block_number())  # releases the webhooks
    (event,) = await events_of(services, invoice)
    clock_of(services).advance(1)  # claims go oldest first: in the order made here
    return event.id


async def settled(services: Services, ids: list[str]) -> dict[str, str]:
    async with services.db.sessions() as session:
        rows = await session.execute(
            select(WebhookEvent.id, WebhookEvent.status).where(WebhookEvent.id.in_(ids))
        )
        return {event_id: status for event_id, status in rows}


@pytest.mark.parametrize("path", sorted(ANSWERS))
async def test_an_unusable_answer_is_a_failed_attempt_and_others_are_delivered_once(
    services: Services, fake: FakeChain, path: str
) -> None:
    async with hostile_server() as server:
        base = f"http://hooks.test:{server.port}"
        hostile = await paid(services, fake, base + path)
        others = [await paid(services, fake, f"{base}/owner{i}") for i in range(3)]
        stop = asyncio.Event()
        client = local_client()
        worker = asyncio.create_task(Dispatcher(services, client).run(stop))
        for _ in range(300):
            statuses = await settled(services, [hostile, *others])
            if "pending" not in statuses.values() or worker.done():
                break
            await asyncio.sleep(0.02)
        crashed = worker.done()
        stop.set()
        await asyncio.wait_for(worker, 10)
        await client.aclose()
        await asyncio.sleep(0.05)  # the server's handlers see the connections close

    assert not crashed
    assert statuses == {hostile: "failed", **{o: "delivered" for o in others}}
    assert sorted(server.requests) == sorted([path, "/owner0", "/owner1", "/owner2"])
    async with services.db.sessions() as session:
        (attempt,) = await session.scalars(
            select(WebhookAttempt).where(WebhookAttempt.event_id == hostile)
        )
    assert (attempt.attempt, attempt.status_code, attempt.error) == (1, None, ANSWERS[path][1])


async def attempts(services: Services, event_id: str) -> list[tuple[int, int | None, str | None]]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.event_id == event_id)
            .order_by(WebhookAttempt.attempt)
        )
        return [(a.attempt, a.status_code, a.error) for a in rows]


async def test_values_no_column_holds_are_stored_as_failed_attempts(
    services: Services, fake: FakeChain
) -> None:
    huge = await paid(services, fake, "https://huge.example/")
    nul = await paid(services, fake, "https://nul.example/")
    others = [await paid(services, fake, f"https://owner{i}.example/") for i in range(3)]
    client = FakeWebhookClient(
        answers=[Outcome(status_code=10**20), Outcome(error="ValueError: a\x00b\nc")]
    )
    dispatcher = Dispatcher(services, client)

    await dispatcher.claim()
    await asyncio.wait(set(dispatcher.in_flight))
    await dispatcher.flush()

    assert [d.url for d in client.sent[:2]] == ["https://huge.example/", "https://nul.example/"]
    assert await settled(services, [huge, nul, *others]) == {
        huge: "failed",
        nul: "failed",
        **{o: "delivered" for o in others},
    }
    assert await attempts(services, huge) == [
        (1, None, "ProtocolError: the status code is not three digits")
    ]
    assert await attempts(services, nul) == [(1, None, "ValueError: a\ufffdb\ufffdc")]
    assert dispatcher.results == []


async def test_a_result_the_database_refuses_does_not_hold_back_the_others(
    services: Services, fake: FakeChain
) -> None:
    gone = await paid(services, fake, "https://gone.example/")
    others = [await paid(services, fake, f"https://owner{i}.example/") for i in range(3)]
    dispatcher = Dispatcher(services, FakeWebhookClient())
    await dispatcher.claim()
    await asyncio.wait(set(dispatcher.in_flight))
    async with services.db.transaction() as session:  # removed while its attempt was out
        await session.execute(delete(WebhookEvent).where(WebhookEvent.id == gone))

    await dispatcher.flush()

    assert await settled(services, [gone, *others]) == {o: "delivered" for o in others}
    assert [await attempts(services, o) for o in others] == [[(1, 200, None)]] * 3
    assert await attempts(services, gone) == []
    assert dispatcher.results == []
