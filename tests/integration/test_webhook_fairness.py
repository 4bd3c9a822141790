"""Fairness between owners, with real HTTP receivers, the real worker and the real database:
one owner's endpoints that hang until the timeout, or answer slowly with a failure, hold at
most three quarters of the worker's slots (their share, ``webhook_per_owner_concurrency``,
and the spare slots), so another owner's webhooks still arrive at once; and one owner's failures at
a URL never push another owner's deliveries to that URL behind everyone (health is kept per
owner and URL)."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import select

from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications import worker
from invoicing.notifications.client import WebhookClient
from invoicing.services import Services
from invoicing.tables.notifications import EndpointHealth, WebhookAttempt, WebhookEvent
from tests.support import webhook_rounds
from tests.support.monitoring import clock_of, fake_services, new_invoice
from tests.support.receiver import Receiver, receiver
from tests.support.signing import new_owner
from tests.support.webhook_rounds import deliver

pytestmark = pytest.mark.integration

# The fixtures of hand-driven delivery (services on a fresh database, the real client).
services = webhook_rounds.services
client = webhook_rounds.client

TIMEOUT_S = 10.0  # long: the bounds below hold on a loaded machine


async def paid_event(services: Services, fake: FakeChain, url: str, owner: str) -> str:
    """A paid invoice of ``owner`` with ``url`` as its webhookUrl; its delivery's id (the
    clock moves 1 ms on, so deliveries made later are younger)."""
    invoice = await new_invoice(services, fake, webhook_url=url, owner_address=owner)
    fake.pay(invoice.payment_address, 10**18)
    await run_block_pass(services, fake, await fake.block_number())  # reads every pending one
    await run_records_step(services, fake, await fake.block_number())  # releases the webhooks
    clock_of(services).advance(1)
    async with services.db.sessions() as session:
        (event_id,) = await session.scalars(
            select(WebhookEvent.id).where(WebhookEvent.invoice_pk == invoice.id)
        )
    return event_id


async def statuses(services: Services, ids: list[str]) -> list[str]:
    async with services.db.sessions() as session:
        found = dict(
            (
                await session.execute(
                    select(WebhookEvent.id, WebhookEvent.status).where(WebhookEvent.id.in_(ids))
                )
            ).all()
        )
    return [found[i] for i in ids]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("delay_s", "answer", "outcome"),
    [(20.0, 200, (None, "timeout")), (8.0, 500, (500, None))],
    ids=["hangs-until-the-timeout", "fails-slowly"],
)
async def test_one_owners_hostile_endpoints_hold_only_their_share_of_the_slots(
    own_database: str, fake: FakeChain, delay_s: float, answer: int, outcome: tuple[object, ...]
) -> None:
    services = fake_services(
        own_database,
        fake,
        webhook_allow_private=True,
        webhook_concurrency=8,
        webhook_per_host_concurrency=8,  # one host: the per-owner cap is what is tested
        webhook_per_owner_concurrency=2,
        webhook_timeout_s=TIMEOUT_S,
    )
    hostile_owner, other_owner = new_owner().address, new_owner().address
    async with receiver() as hostile, receiver() as fine:
        hostile.delay_s["/slow"] = delay_s
        hostile.default = answer
        slow = hostile.url("slow")
        stalled = [await paid_event(services, fake, slow, hostile_owner) for _ in range(10)]
        others = [
            await paid_event(services, fake, fine.url(f"ok/{i}"), other_owner) for i in range(4)
        ]
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(worker.run(services, stop))
        try:
            while await statuses(services, others) != ["delivered"] * 4:
                assert time.monotonic() - started < 3 * TIMEOUT_S, "never delivered"
                await asyncio.sleep(0.02)
            others_done_s = time.monotonic() - started
            stalled_then = await statuses(services, stalled)
        finally:
            stop.set()
            await asyncio.wait_for(task, 3 * TIMEOUT_S)

    # Delivered while the hostile owner's first attempts were still open.
    assert others_done_s < min(delay_s, TIMEOUT_S) - 1.0, others_done_s
    assert stalled_then == ["pending"] * 10
    assert hostile.peak_in_flight["/slow"] == 6  # three quarters of the slots, never more
    async with services.db.sessions() as session:
        attempts = (
            await session.execute(
                select(WebhookAttempt.event_id, WebhookAttempt.status_code, WebhookAttempt.error)
            )
        ).all()
    assert sorted((e, s) for e, s, _ in attempts if e in others) == sorted((e, 200) for e in others)
    hostile_attempts = [(s, "timeout" if err else None) for e, s, err in attempts if e in stalled]
    assert hostile_attempts == [outcome] * 6  # the other four waited for a slot of its own
    await services.db.dispose()


async def test_another_owners_failures_at_a_url_do_not_push_its_owners_deliveries_back(
    services: Services, fake: FakeChain, hooks: Receiver, client: WebhookClient
) -> None:
    """The intruder registers the victim's URL; the victim's receiver refuses what the
    victim did not sign (401), so the intruder's deliveries there fail. The victim's own
    deliveries to it keep their place: oldest first, before a younger one elsewhere."""
    victim, intruder, third = new_owner().address, new_owner().address, new_owner().address
    shared = hooks.url("victim")
    hooks.answers["/victim"] = [401, 401]  # the intruder's two attempts; then 200
    refused = [await paid_event(services, fake, shared, intruder) for _ in range(2)]
    assert await deliver(services, client, limit=10) == refused
    victims = await paid_event(services, fake, shared, victim)
    younger = await paid_event(services, fake, hooks.url("third"), third)

    assert await deliver(services, client, limit=1) == [victims]  # not pushed back
    assert await deliver(services, client, limit=1) == [younger]
    async with services.db.sessions() as session:
        streaks = [
            (h.url, h.consecutive_failures) for h in await session.scalars(select(EndpointHealth))
        ]
    assert streaks == [(shared, 2)]  # the intruder's, on its own key
    assert [r.path for r in hooks.requests] == ["/victim", "/victim", "/victim", "/third"]


@pytest.mark.slow
async def test_one_owner_at_its_cap_on_a_shared_host_leaves_that_host_to_the_others(
    own_database: str, fake: FakeChain
) -> None:
    # Both owners deliver to one host (a hosted receiver many owners use); the first owner's
    # older deliveries there hang. The per-host cap is each owner's: the second owner's
    # webhooks to that host still go out at once, not after the first owner's attempts.
    slow_s = 5.0
    services = fake_services(
        own_database,
        fake,
        webhook_allow_private=True,
        webhook_concurrency=8,
        webhook_per_host_concurrency=2,
        webhook_per_owner_concurrency=8,  # the owner caps stay out of the way
        webhook_timeout_s=TIMEOUT_S,
    )
    hostile_owner, other_owner = new_owner().address, new_owner().address
    async with receiver() as shared:
        shared.delay_s["/slow"] = slow_s
        stalled = [
            await paid_event(services, fake, shared.url("slow"), hostile_owner) for _ in range(4)
        ]
        others = [
            await paid_event(services, fake, shared.url(f"ok/{i}"), other_owner) for i in range(2)
        ]
        stop = asyncio.Event()
        started = time.monotonic()
        task = asyncio.create_task(worker.run(services, stop))
        try:
            while await statuses(services, others) != ["delivered"] * 2:
                assert time.monotonic() - started < 3 * TIMEOUT_S, "never delivered"
                await asyncio.sleep(0.02)
            others_done_s = time.monotonic() - started
            stalled_then = await statuses(services, stalled)
        finally:
            stop.set()
            await asyncio.wait_for(task, 3 * TIMEOUT_S)

    assert others_done_s < slow_s - 1.0, others_done_s  # while the first owner's still hang
    assert stalled_then == ["pending"] * 4
    assert shared.peak_in_flight["/slow"] == 2  # the first owner's cap at the host
    assert shared.peak_in_flight["/ok/0"] == shared.peak_in_flight["/ok/1"] == 1
    await services.db.dispose()
