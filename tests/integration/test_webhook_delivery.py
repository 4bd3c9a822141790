"""Outbox delivery with the in-memory client: headers, retries, give-up, claims, slow endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import select

from invoicing.auth.api_keys import create_api_key, revoke_api_key
from invoicing.auth.guard import Caller
from invoicing.auth.secrets import ServerSecrets
from invoicing.chain.fake import FakeChain
from invoicing.db import Database
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications.claims import claim_events
from invoicing.notifications.client import Delivery, FakeWebhookClient, Outcome
from invoicing.notifications.delivery import AttemptResult, record_results
from invoicing.notifications.outbox import OUTBOX_BELL, ring_after_commit
from invoicing.notifications.worker import Dispatcher
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import WebhookAttempt
from tests.support.monitoring import (
    clock_of,
    events_of,
    fake_services,
    new_invoice,
)
from tests.support.signing import new_owner

ETH = 10**18


@pytest.fixture
async def services(own_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(own_database, fake, webhook_max_attempts=3)
    yield built
    await built.db.dispose()


async def paid_invoice(services: Services, fake: FakeChain, **kwargs: object) -> Invoice:
    invoice = await new_invoice(services, fake, **kwargs)  # type: ignore[arg-type]
    fake.pay(invoice.payment_address, ETH)
    # The block pass reads every pending invoice (a due pass skips shards read recently);
    # then, as the monitor does, the payments-of-record step, which releases the held paid
    # webhook.
    await run_block_pass(services, fake, await fake.block_number())
    await run_records_step(services, fake, await fake.block_number())
    return invoice


async def attempts_of(services: Services, event_id: str) -> list[WebhookAttempt]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.event_id == event_id)
            .order_by(WebhookAttempt.attempt)
        )
        return list(rows)


async def deliver_due(services: Services, client: FakeWebhookClient) -> int:
    """One claim-send-record round, as the worker does it."""
    mine = await claim_events(services, services.clock.now_ms(), 1000)
    results = [
        AttemptResult.of(c, services.clock.now_ms(), await client.send(c.delivery)) for c in mine
    ]
    await record_results(services, results)
    return len(mine)


async def test_signature_mode_headers_and_body(services: Services, fake: FakeChain) -> None:
    owner = new_owner()
    caller = Caller(
        owner.address.lower(), "signature", signature="0xabc123", timestamp="1760000000000"
    )
    invoice = await paid_invoice(services, fake, caller=caller, owner_address=owner.address)
    (event,) = await events_of(services, invoice)

    (claimed,) = await claim_events(services, services.clock.now_ms(), 10)

    assert (claimed.event_id, claimed.attempt) == (event.id, 1)
    assert claimed.delivery.url == "https://hooks.example/paid"
    assert claimed.delivery.headers == {
        "content-type": "application/json",
        "x-service-signature": "0xabc123",
        "x-service-timestamp": "1760000000000",
        "x-service-event-id": event.id,
        "x-service-delivery-attempt": "1",
    }
    assert json.loads(claimed.delivery.body) == {
        "ownerAddress": owner.address,
        "chainId": fake.config.chain_id,
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "salt": invoice.salt,
        "capture": "automatic",
        "amount": "1",
        "tokenAddress": None,
        "status": "paid",
        "paid": True,
        "paidAt": services.clock.now_ms(),
        "requiredRaw": str(ETH),
        "balanceRaw": str(ETH),
        "balance": 1.0,
        "updatedAt": services.clock.now_ms(),
    }


async def test_api_key_mode_sends_the_owners_key(services: Services, fake: FakeChain) -> None:
    owner = new_owner()
    async with services.db.transaction() as session:
        row, api_key = await create_api_key(
            session,
            owner.address,
            "shop",
            ServerSecrets.of(services.settings),
            services.clock.now_ms(),
        )
    caller = Caller(owner.address.lower(), "api_key", api_key_id=row.id)
    await paid_invoice(services, fake, caller=caller, owner_address=owner.address)

    (claimed,) = await claim_events(services, services.clock.now_ms(), 10)

    assert claimed.delivery.headers["x-service-api-key"] == api_key.get_secret_value()
    assert "x-service-signature" not in claimed.delivery.headers
    assert "x-service-timestamp" not in claimed.delivery.headers


async def test_a_revoked_api_key_is_not_sent(services: Services, fake: FakeChain) -> None:
    owner = new_owner()
    async with services.db.transaction() as session:
        row, api_key = await create_api_key(
            session,
            owner.address,
            "shop",
            ServerSecrets.of(services.settings),
            services.clock.now_ms(),
        )
    caller = Caller(owner.address.lower(), "api_key", api_key_id=row.id)
    await paid_invoice(services, fake, caller=caller, owner_address=owner.address)
    async with services.db.transaction() as session:
        await revoke_api_key(session, owner.address.lower(), row.id, services.clock.now_ms())

    (claimed,) = await claim_events(services, services.clock.now_ms(), 10)

    assert api_key.get_secret_value() not in json.dumps(claimed.delivery.headers)
    assert claimed.delivery.headers == {
        "content-type": "application/json",
        "x-service-event-id": claimed.event_id,
        "x-service-delivery-attempt": "1",
    }


async def test_retries_after_the_delay_with_one_event_id_until_2xx(
    services: Services, fake: FakeChain
) -> None:
    invoice = await paid_invoice(services, fake)
    (event,) = await events_of(services, invoice)
    client = FakeWebhookClient(
        answers=[Outcome(status_code=500), Outcome(error="timeout after 10 s")]
    )

    assert await deliver_due(services, client) == 1
    clock_of(services).advance(59_999)
    assert await deliver_due(services, client) == 0
    clock_of(services).advance(1)
    assert await deliver_due(services, client) == 1
    clock_of(services).advance(60_000)
    assert await deliver_due(services, client) == 1
    clock_of(services).advance(60_000)
    assert await deliver_due(services, client) == 0

    assert [d.headers["x-service-event-id"] for d in client.sent] == [event.id] * 3
    assert [d.headers["x-service-delivery-attempt"] for d in client.sent] == ["1", "2", "3"]
    attempts = await attempts_of(services, event.id)
    assert [(a.attempt, a.status_code, a.error) for a in attempts] == [
        (1, 500, None),
        (2, None, "timeout after 10 s"),
        (3, 200, None),
    ]
    (done,) = await events_of(services, invoice)
    assert (done.status, done.attempts, done.delivered_at) == (
        "delivered",
        3,
        services.clock.now_ms() - 60_000,
    )


async def test_gives_up_after_max_attempts(services: Services, fake: FakeChain) -> None:
    invoice = await paid_invoice(services, fake)
    client = FakeWebhookClient(default=Outcome(status_code=503))

    for _ in range(5):
        await deliver_due(services, client)
        clock_of(services).advance(60_000)

    (event,) = await events_of(services, invoice)
    assert (event.status, event.attempts) == ("failed", 3)
    assert len(client.sent) == 3


async def test_a_refused_target_fails_at_once(services: Services, fake: FakeChain) -> None:
    invoice = await paid_invoice(services, fake)
    client = FakeWebhookClient(default=Outcome(error="refused: private", terminal=True))

    await deliver_due(services, client)
    clock_of(services).advance(60_000)
    await deliver_due(services, client)

    (event,) = await events_of(services, invoice)
    assert (event.status, event.attempts) == ("failed", 1)
    assert [(a.attempt, a.error) for a in await attempts_of(services, event.id)] == [
        (1, "refused: private")
    ]


async def test_a_claimed_event_is_not_claimed_again_until_its_lease_ends(
    services: Services, fake: FakeChain
) -> None:
    await paid_invoice(services, fake)
    now_ms = services.clock.now_ms()

    first = await claim_events(services, now_ms, 10)
    during = await claim_events(services, now_ms + 39_999, 10)
    after = await claim_events(services, now_ms + 40_000, 10)

    assert [c.attempt for c in first] == [1]
    assert during == []
    assert [(c.event_id, c.attempt) for c in after] == [(first[0].event_id, 2)]


async def test_a_late_result_of_an_expired_claim_does_not_undo_the_newer_attempt(
    services: Services, fake: FakeChain
) -> None:
    invoice = await paid_invoice(services, fake)
    now_ms = services.clock.now_ms()
    (old,) = await claim_events(services, now_ms, 10)
    (new,) = await claim_events(services, now_ms + 40_000, 10)

    await record_results(
        services,
        [AttemptResult.of(old, now_ms, Outcome(status_code=200))],
    )

    (event,) = await events_of(services, invoice)
    assert (event.status, event.attempts) == ("pending", 2)
    assert [a.attempt for a in await attempts_of(services, event.id)] == [1]
    await record_results(
        services,
        [AttemptResult.of(new, now_ms, Outcome(status_code=200))],
    )
    (event,) = await events_of(services, invoice)
    assert event.status == "delivered"


@dataclass
class SlowForOne:
    """A client whose ``slow`` URL takes ``delay_s``; every other URL answers at once."""

    slow: str
    delay_s: float
    finished: dict[str, float] = field(default_factory=dict)

    async def send(self, delivery: Delivery) -> Outcome:
        if delivery.url == self.slow:
            await asyncio.sleep(self.delay_s)
        self.finished[delivery.url] = time.monotonic()
        return Outcome(status_code=200)

    async def aclose(self) -> None:
        return None


async def test_a_slow_endpoint_does_not_delay_the_others(
    own_database: str, fake: FakeChain
) -> None:
    services = fake_services(own_database, fake, webhook_concurrency=4)
    slow = await paid_invoice(services, fake, webhook_url="https://slow.example/")
    fast = [
        await paid_invoice(services, fake, webhook_url=f"https://fast{i}.example/")
        for i in range(6)
    ]
    client = SlowForOne("https://slow.example/", delay_s=6.0)
    stop = asyncio.Event()
    started = time.monotonic()
    task = asyncio.create_task(Dispatcher(services, client).run(stop))

    for _ in range(400):
        statuses = [e.status for i in fast for e in await events_of(services, i)]
        if statuses == ["delivered"] * 6:
            break
        await asyncio.sleep(0.02)
    fast_done_s = time.monotonic() - started
    (slow_event,) = await events_of(services, slow)
    stop.set()
    await asyncio.wait_for(task, 10)

    assert statuses == ["delivered"] * 6
    assert fast_done_s < 5.0  # before the slow one's 6 s (a loaded slow machine takes 1.4 to 3 s)
    assert slow_event.status == "pending"  # still in flight when the others were done
    (slow_event,) = await events_of(services, slow)
    assert slow_event.status == "delivered"  # recorded on shutdown
    await services.db.dispose()


async def test_a_freed_slot_is_used_at_once_not_at_the_next_poll(
    own_database: str, fake: FakeChain
) -> None:
    # One slot per host and a poll interval far longer than the test: each delivery after
    # the first starts only because the previous one woke the worker when it finished.
    services = fake_services(
        own_database, fake, webhook_per_host_concurrency=1, webhook_poll_interval_s=30
    )
    owner = new_owner().address  # the per-host cap is each owner's
    invoices = [
        await paid_invoice(
            services, fake, webhook_url=f"https://one.example/{i}", owner_address=owner
        )
        for i in range(5)
    ]
    client = FakeWebhookClient()
    stop = asyncio.Event()
    task = asyncio.create_task(Dispatcher(services, client).run(stop))
    for _ in range(500):
        if len(client.sent) == 5:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)

    assert sorted(d.url for d in client.sent) == [f"https://one.example/{i}" for i in range(5)]
    statuses = [e.status for i in invoices for e in await events_of(services, i)]
    assert statuses == ["delivered"] * 5
    await services.db.dispose()


@dataclass
class PacedClient(FakeWebhookClient):
    """Answers 200 after ``delay_s``; counts the attempts sending at once and the most the
    worker had claimed for the host meanwhile."""

    delay_s: float = 0.02
    sending: int = 0
    peak_sending: int = 0
    peak_claimed: int = 0
    dispatcher: Dispatcher | None = None

    async def send(self, delivery: Delivery) -> Outcome:
        self.sending += 1
        self.peak_sending = max(self.peak_sending, self.sending)
        if self.dispatcher is not None:
            claimed = sum(self.dispatcher.counted.owner_hosts.values())  # one owner, one host
            self.peak_claimed = max(self.peak_claimed, claimed)
        await asyncio.sleep(self.delay_s)
        self.sending -= 1
        return await super().send(delivery)


async def test_a_fast_host_has_attempts_queued_behind_its_cap_never_more_sending(
    own_database: str, fake: FakeChain
) -> None:
    # The queue refills a fast host's slots while the worker's next round is at the
    # database; what is sent at once stays within the host's cap.
    services = fake_services(own_database, fake, webhook_per_host_concurrency=2)
    owner = new_owner().address  # the per-host cap is each owner's
    invoices = [
        await paid_invoice(
            services, fake, webhook_url=f"https://one.example/{i}", owner_address=owner
        )
        for i in range(12)
    ]
    client = PacedClient()
    dispatcher = client.dispatcher = Dispatcher(services, client)
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    for _ in range(1000):
        if len(client.sent) == 12:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)

    assert sorted(d.url for d in client.sent) == sorted(
        f"https://one.example/{i}" for i in range(12)
    )
    assert client.peak_sending == 2
    assert client.peak_claimed == 4  # its cap in flight and as many queued, once it was fast
    statuses = [e.status for i in invoices for e in await events_of(services, i)]
    assert statuses == ["delivered"] * 12
    assert dispatcher.gates == {} and list(dispatcher.counted.fast) == ["one.example:443"]
    assert dispatcher.counted.owner_hosts == {}
    await services.db.dispose()


async def test_a_delivery_committed_in_this_process_is_sent_at_once_not_at_the_next_poll(
    own_database: str, fake: FakeChain
) -> None:
    # The worker idles with a poll interval far longer than the test; the monitor's commit
    # of a paid invoice rings the outbox bell, which wakes it.
    services = fake_services(own_database, fake, webhook_poll_interval_s=30)
    client = FakeWebhookClient()
    stop = asyncio.Event()
    task = asyncio.create_task(Dispatcher(services, client).run(stop))
    await asyncio.sleep(0.2)  # the worker found nothing and waits
    invoice = await paid_invoice(services, fake, webhook_url="https://one.example/paid")
    for _ in range(500):
        if client.sent:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)

    assert [d.url for d in client.sent] == ["https://one.example/paid"]
    assert [e.status for e in await events_of(services, invoice)] == ["delivered"]
    await services.db.dispose()


async def test_a_rolled_back_transaction_does_not_ring_the_bell(own_database: str) -> None:
    database = Database(own_database)
    listener = OUTBOX_BELL.of(database).listen()
    with contextlib.suppress(RuntimeError):
        async with database.transaction() as session:
            ring_after_commit(session)
            raise RuntimeError("rolled back")
    assert not listener.is_set()
    async with database.transaction() as session:
        ring_after_commit(session)
        assert not listener.is_set()  # not before the commit
    assert listener.is_set()
    await database.dispose()
