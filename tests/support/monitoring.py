"""Helpers for monitor and webhook unit tests: Services over a FakeChain and the test DB."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import select

from invoicing.auth.guard import Caller
from invoicing.chain.chains import ChainRegistry
from invoicing.chain.fake import FakeChain
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.invoices.create import CreateRules, NewInvoice, create_invoice
from invoicing.invoices.owner_view import owner_views
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import WebhookEvent
from tests.support.signing import new_owner

TOKEN = "0x" + "7e" * 20


def new_fake_chain() -> FakeChain:
    """A chain id of its own, so passes never touch other tests' invoices in the shared DB."""
    chain = FakeChain(chain_id=random.randrange(10**6, 10**9))
    chain.add_token(TOKEN, 6, "TUSD")
    return chain


def fake_services(database_url: str, fake: FakeChain, **overrides: Any) -> Services:
    fields: dict[str, Any] = {
        "environment": "development",
        "database_url": database_url,
        "run_workers": False,
        "monitor_interval_s": 20,
        "monitor_expired_interval_s": 300,
        "late_payment_window_s": 7 * 24 * 3600,
        "monitor_poll_interval_s": 0.01,
        "webhook_retry_delay_s": 60,
        "webhook_max_attempts": 20,
        "webhook_poll_interval_s": 0.01,
    }
    fields.update(overrides)
    return Services(
        settings=Settings(**fields),
        db=Database(database_url),
        chains=ChainRegistry({fake.config.chain_id: fake}),
        clock=FakeClock(),
    )


def clock_of(services: Services) -> FakeClock:
    assert isinstance(services.clock, FakeClock)
    return services.clock


async def new_invoice(
    services: Services,
    fake: FakeChain,
    amount: str = "1",
    token: str | None = None,
    webhook_url: str | None = "https://hooks.example/paid",
    expires_in_ms: int = 3600_000,
    caller: Caller | None = None,
    owner_address: str | None = None,
) -> Invoice:
    owner = owner_address or new_owner().address
    now_ms = services.clock.now_ms()
    invoice, _ = await create_invoice(
        services.db,
        fake,
        NewInvoice(
            owner_address=owner,
            chain_id=fake.config.chain_id,
            amount=amount,
            token_address=token,
            webhook_url=webhook_url,
            expires_at=now_ms + expires_in_ms,
        ),
        caller or Caller(owner.lower(), "signature", signature="0xsig", timestamp="1"),
        now_ms,
        86400,
        CreateRules(late_payment_window_s=services.settings.late_payment_window_s),
    )
    return invoice


async def reload(services: Services, invoice: Invoice) -> Invoice:
    async with services.db.sessions() as session:
        row = await session.get(Invoice, invoice.id)
    assert row is not None
    return row


async def events_of(services: Services, invoice: Invoice) -> list[WebhookEvent]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WebhookEvent).where(WebhookEvent.invoice_pk == invoice.id)
        )
        return list(rows)


async def row_values(services: Services, invoice: Invoice) -> tuple[object, ...]:
    """Every column of the invoice's row, as stored."""
    async with services.db.sessions() as session:
        row = (
            await session.execute(select(Invoice.__table__).where(Invoice.id == invoice.id))
        ).one()
    return tuple(row)


async def shown_last_checked(services: Services, invoice: Invoice) -> int:
    """The ``lastCheckedAt`` the owner's view of the invoice shows now."""
    async with services.db.sessions() as session:
        row = await session.get(Invoice, invoice.id)
        assert row is not None
        (view,) = await owner_views(session, services.settings.payment_page_url, [row])
    return int(view["lastCheckedAt"])
