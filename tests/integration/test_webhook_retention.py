"""Housekeeping prunes finished webhook events and their attempts past the retention."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from invoicing import housekeeping
from invoicing.chain.fake import FakeChain
from invoicing.notifications.retention import prune_finished_events
from invoicing.services import Services
from invoicing.tables.notifications import EventStatus, WebhookAttempt, WebhookEvent
from tests.support.monitoring import fake_services, new_invoice

DAY_MS = 86_400_000


@pytest.fixture
async def services(module_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(module_database, fake)
    yield built
    await built.db.dispose()


async def add_event(
    services: Services, fake: FakeChain, status: str, age_ms: int, attempts: int = 2
) -> str:
    """An event of a fresh invoice created ``age_ms`` ago, with ``attempts`` attempts."""
    invoice = await new_invoice(services, fake)
    created_at = services.clock.now_ms() - age_ms
    event_id = str(uuid.uuid4())
    async with services.db.transaction() as session:
        session.add(
            WebhookEvent(
                id=event_id,
                invoice_pk=invoice.id,
                owner_key=invoice.owner_key,
                url="https://hooks.example/paid",
                endpoint_key="k" * 64,
                endpoint_host="hooks.example:443",
                payload={"status": "paid"},
                status=status,
                attempts=attempts,
                next_attempt_at=created_at,
                claimed_until=0,
                created_at=created_at,
            )
        )
        await session.flush()
        for number in range(1, attempts + 1):
            session.add(
                WebhookAttempt(
                    event_id=event_id,
                    attempt=number,
                    attempted_at=created_at,
                    duration_ms=5,
                    status_code=500,
                )
            )
    return event_id


async def remaining(services: Services, ids: list[str]) -> tuple[set[str], set[str]]:
    """Which of the events ``ids`` are left, and which of them still have attempts."""
    async with services.db.sessions() as session:
        events = set(await session.scalars(select(WebhookEvent.id).where(WebhookEvent.id.in_(ids))))
        attempts = set(
            await session.scalars(
                select(WebhookAttempt.event_id).where(WebhookAttempt.event_id.in_(ids))
            )
        )
    return events, attempts


async def test_only_finished_events_past_30_days_go_with_their_attempts(
    services: Services, fake: FakeChain
) -> None:
    old_delivered = await add_event(services, fake, EventStatus.DELIVERED, 31 * DAY_MS)
    old_failed = await add_event(services, fake, EventStatus.FAILED, 40 * DAY_MS)
    old_pending = await add_event(services, fake, EventStatus.PENDING, 45 * DAY_MS)
    at_the_limit = await add_event(services, fake, EventStatus.DELIVERED, 30 * DAY_MS)
    recent = await add_event(services, fake, EventStatus.FAILED, 2 * DAY_MS)

    await housekeeping.run_once(services)

    mine = [old_delivered, old_failed, old_pending, at_the_limit, recent]
    kept = {old_pending, at_the_limit, recent}
    assert await remaining(services, mine) == (kept, kept)


async def test_the_retention_is_a_setting(module_database: str, fake: FakeChain) -> None:
    services = fake_services(module_database, fake, webhook_event_retention_s=3600)
    try:
        two_hours = await add_event(services, fake, EventStatus.DELIVERED, 2 * 3_600_000)
        half_hour = await add_event(services, fake, EventStatus.DELIVERED, 1_800_000)

        await housekeeping.run_once(services)

        mine = [two_hours, half_hour]
        assert await remaining(services, mine) == ({half_hour}, {half_hour})
    finally:
        await services.db.dispose()


async def test_a_backlog_is_pruned_in_chunks(services: Services, fake: FakeChain) -> None:
    old = [await add_event(services, fake, EventStatus.DELIVERED, 60 * DAY_MS) for _ in range(5)]
    kept = await add_event(services, fake, EventStatus.PENDING, 60 * DAY_MS, attempts=1)

    pruned = await prune_finished_events(services.db, services.clock.now_ms(), 30 * DAY_MS, chunk=2)

    assert pruned == len(old) == 5
    assert await remaining(services, [*old, kept]) == ({kept}, {kept})
