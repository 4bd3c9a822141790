"""Endpoint health and the per-host cap, with a real HTTP receiver and the real database.

The chain is the in-memory fake (payments are not the subject here); deliveries are real
HTTP to ``tests/support/receiver.py`` through the SSRF-guarded client.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import select

from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications import worker
from invoicing.notifications.claims import claim_events
from invoicing.notifications.client import WebhookClient
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EndpointHealth, WebhookAttempt, WebhookEvent
from tests.support import webhook_rounds
from tests.support.monitoring import clock_of, events_of, fake_services, new_invoice
from tests.support.receiver import Receiver, receiver
from tests.support.signing import new_owner
from tests.support.webhook_rounds import deliver

pytestmark = pytest.mark.integration

# The fixtures of hand-driven delivery (services on a fresh database, the real client).
services = webhook_rounds.services
client = webhook_rounds.client

RETRY_MS = 60_000


# Health is kept per owner and URL: the tests of one endpoint's health make its events as one
# owner's.
OWNER = new_owner().address


async def paid_event(
    services: Services, fake: FakeChain, url: str, owner: str | None = OWNER
) -> str:
    """A paid invoice of ``owner`` (None: a new one) with ``url`` as its webhookUrl; its
    event's id. The clock moves 1 ms on, so events made later are younger."""
    invoice: Invoice = await new_invoice(services, fake, webhook_url=url, owner_address=owner)
    fake.pay(invoice.payment_address, 10**18)
    await run_block_pass(services, fake, await fake.block_number())  # reads every pending one
    await run_records_step(services, fake, await fake.block_number())  # releases the webhooks
    clock_of(services).advance(1)
    (event,) = await events_of(services, invoice)
    return event.id


async def health(services: Services) -> dict[str, int]:
    """Failing streaks by URL (endpoints without a row have none)."""
    async with services.db.sessions() as session:
        rows = await session.scalars(select(EndpointHealth))
        return {row.url: row.consecutive_failures for row in rows}


async def attempts(services: Services) -> list[tuple[str, int, int | None]]:
    async with services.db.sessions() as session:
        rows = await session.execute(
            select(WebhookAttempt.event_id, WebhookAttempt.attempt, WebhookAttempt.status_code)
        )
        return sorted((event_id, attempt, status) for event_id, attempt, status in rows)


async def statuses(services: Services, ids: list[str]) -> list[str]:
    async with services.db.sessions() as session:
        found = {
            e.id: e.status
            for e in await session.scalars(select(WebhookEvent).where(WebhookEvent.id.in_(ids)))
        }
    return [found[i] for i in ids]


async def test_a_failing_endpoints_due_events_wait_behind_healthy_ones_when_slots_are_scarce(
    services: Services, fake: FakeChain, hooks: Receiver, client: WebhookClient
) -> None:
    failing, healthy = hooks.url("down"), hooks.url("up")
    hooks.answers["/down"] = [500, 500, 500]
    first = await paid_event(services, fake, failing)
    assert await deliver(services, client) == [first]
    older = [await paid_event(services, fake, failing) for _ in range(2)]
    newer = [await paid_event(services, fake, healthy) for _ in range(2)]

    scarce = await deliver(services, client, limit=2)
    rest = await deliver(services, client, limit=10)

    assert scarce == newer  # younger, but their endpoint works
    assert rest == older  # then the failing endpoint's, oldest first: none skipped
    assert await health(services) == {failing: 3}
    assert await attempts(services) == sorted(
        [(first, 1, 500)] + [(e, 1, 500) for e in older] + [(e, 1, 200) for e in newer]
    )


async def test_without_a_shortage_of_slots_every_due_event_goes_out_oldest_first(
    services: Services, fake: FakeChain, hooks: Receiver, client: WebhookClient
) -> None:
    failing, healthy = hooks.url("down"), hooks.url("up")
    hooks.answers["/down"] = [500, 500]
    await paid_event(services, fake, failing)
    await deliver(services, client)
    older = await paid_event(services, fake, failing)
    newer = await paid_event(services, fake, healthy)

    assert await deliver(services, client, limit=10) == [older, newer]


async def test_a_success_resets_the_endpoint(
    services: Services, fake: FakeChain, hooks: Receiver, client: WebhookClient
) -> None:
    flaky, other = hooks.url("flaky"), hooks.url("other")
    hooks.answers["/flaky"] = [500, 503]  # then 200
    first = await paid_event(services, fake, flaky)
    await deliver(services, client)
    second = await paid_event(services, fake, flaky)
    await deliver(services, client)
    assert await health(services) == {flaky: 2}

    clock_of(services).advance(RETRY_MS)
    assert await deliver(services, client) == [first, second]  # attempt 2: both 200
    assert await health(services) == {}
    assert await statuses(services, [first, second]) == ["delivered", "delivered"]
    older = await paid_event(services, fake, flaky)
    newer = await paid_event(services, fake, other)
    assert await deliver(services, client, limit=1) == [older]  # oldest first again
    assert await deliver(services, client, limit=1) == [newer]
    recorded = await attempts(services)
    assert [(a, s) for e, a, s in recorded if e == first] == [(1, 500), (2, 200)]
    assert [(a, s) for e, a, s in recorded if e == second] == [(1, 503), (2, 200)]


async def test_a_failing_endpoints_event_waits_at_most_one_retry_delay(
    services: Services, fake: FakeChain, hooks: Receiver, client: WebhookClient
) -> None:
    failing, healthy = hooks.url("down"), hooks.url("up")
    hooks.answers["/down"] = [500]
    first = await paid_event(services, fake, failing)
    await deliver(services, client)
    waiting = await paid_event(services, fake, failing)
    newer = await paid_event(services, fake, healthy)

    clock_of(services).advance(RETRY_MS)  # `waiting` is now due for a whole retry delay

    claimed = await claim_events(services, services.clock.now_ms(), 2)
    assert [c.event_id for c in claimed] == [waiting, newer]
    (retry,) = await claim_events(services, services.clock.now_ms(), 10)
    assert (retry.event_id, retry.attempt) == (first, 2)


HANG_S = 6.0


@pytest.mark.slow
async def test_a_hanging_host_never_holds_more_than_its_cap_of_slots(
    own_database: str, fake: FakeChain, hooks: Receiver
) -> None:
    capped = fake_services(
        own_database,
        fake,
        webhook_allow_private=True,
        webhook_concurrency=6,
        webhook_per_host_concurrency=2,
    )
    async with receiver() as fast_host:
        # Long enough that the fast host's deliveries end well inside the first hanging
        # attempts even on a loaded machine.
        hooks.delay_s["/hang"] = HANG_S
        hanging = [await paid_event(capped, fake, hooks.url("hang")) for _ in range(5)]
        fast = [await paid_event(capped, fake, fast_host.url(f"fast/{i}")) for i in range(8)]
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(worker.run(capped, stop))
        try:
            while await statuses(capped, fast) != ["delivered"] * 8:
                assert time.monotonic() - started < 10, await statuses(capped, fast)
                await asyncio.sleep(0.02)
            fast_done_s = time.monotonic() - started
            hanging_then = await statuses(capped, hanging)
            while await statuses(capped, hanging) != ["delivered"] * 5:
                assert time.monotonic() - started < 4 * HANG_S, await statuses(capped, hanging)
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    assert fast_done_s < HANG_S  # while the first hanging attempts were still open
    assert hanging_then.count("pending") >= 3
    assert hooks.peak_in_flight["/hang"] == 2
    assert fast_host.peak_in_flight.total() <= 8
    assert await attempts(capped) == sorted(
        [(e, 1, 200) for e in hanging] + [(e, 1, 200) for e in fast]
    )
    await capped.db.dispose()
