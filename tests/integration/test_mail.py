"""Mail to owners through a real SMTP server (aiosmtpd): the outbox, the worker, retries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import select

from invoicing import housekeeping
from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass
from invoicing.notifications.mail import worker as mail_worker
from invoicing.notifications.mail.choices import MailChoices, set_mail_choices
from invoicing.payments.subscriptions.models import Subscription, SubscriptionEvent
from invoicing.payments.subscriptions.service import record_event
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.mail import MailMessage
from invoicing.web.api.mail import MAILED_EVENTS
from tests.support.monitoring import clock_of, fake_services, new_invoice
from tests.support.signing import new_owner
from tests.support.smtp import SmtpServer

ETH = 10**18
SENDER = "invoices@shop.example"


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def services(own_database: str, fake: FakeChain, smtp: SmtpServer) -> AsyncIterator[Services]:
    built = fake_services(
        own_database,
        fake,
        smtp_url=smtp.url,
        smtp_from=SENDER,
        smtp_timeout_s=2.0,
        mail_poll_interval_s=0.05,
    )
    yield built
    await built.db.dispose()


async def owner_mailing(services: Services, email: str, events: tuple[str, ...]) -> str:
    owner = new_owner().address
    async with services.db.transaction() as session:
        await set_mail_choices(
            session,
            owner.lower(),
            MailChoices(email, events, "de"),
            MAILED_EVENTS,
            services.clock.now_ms(),
        )
    return owner


async def paid_invoice(services: Services, fake: FakeChain, owner: str) -> Invoice:
    invoice = await new_invoice(services, fake, owner_address=owner, webhook_url=None)
    fake.pay(invoice.payment_address, ETH)
    await run_block_pass(services, fake, await fake.block_number())
    return invoice


async def messages(services: Services) -> list[MailMessage]:
    async with services.db.sessions() as session:
        return list(await session.scalars(select(MailMessage).order_by(MailMessage.created_at)))


async def test_a_paid_invoice_mails_the_owner_within_seconds(
    services: Services, fake: FakeChain, smtp: SmtpServer
) -> None:
    owner = await owner_mailing(services, "owner@shop.example", ("invoice.paid",))
    stop = asyncio.Event()
    worker = asyncio.create_task(mail_worker.run(services, stop))
    try:
        invoice = await paid_invoice(services, fake, owner)
        started = time.monotonic()
        await asyncio.to_thread(smtp.inbox.arrived.wait, 5)
        took_s = time.monotonic() - started
    finally:
        stop.set()
        await worker

    (received,) = smtp.inbox.received
    assert took_s < 5
    assert received.sender == SENDER
    assert received.recipients == ["owner@shop.example"]
    assert received.message["Subject"] == f"Rechnung {invoice.invoice_id} wurde bezahlt"
    body = received.message.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert f"Rechnung: {invoice.invoice_id}" in body.decode()
    (row,) = await messages(services)
    assert (row.status, row.attempts, row.event_type) == ("sent", 1, "invoice.paid")


async def test_the_subscription_events_the_owner_chose_are_mailed(
    services: Services, smtp: SmtpServer
) -> None:
    chosen = (SubscriptionEvent.CHARGED.value, SubscriptionEvent.CANCELLED.value)
    owner = await owner_mailing(services, "owner@shop.example", chosen)
    sub = Subscription(id="sub-7", owner_key=owner.lower(), status="active")
    escrow = new_owner().address
    async with services.db.transaction() as session:
        await record_event(session, services, sub, SubscriptionEvent.ACTIVATED, {"payer": escrow})
        charged = {"period": 3, "paymentAddress": escrow}
        await record_event(session, services, sub, SubscriptionEvent.CHARGED, charged)
    sub.status = "cancelled"
    async with services.db.transaction() as session:
        await record_event(session, services, sub, SubscriptionEvent.CANCELLED, {"by": "payer"})
    await mail_worker.send_due(services, mail_worker.mailer_for(services.settings))  # type: ignore[arg-type]

    assert sorted(row.event_type for row in await messages(services)) == sorted(chosen)
    by_subject = {r.message["Subject"]: r.message for r in smtp.inbox.received}
    assert set(by_subject) == {
        "Abonnement sub-7: Zeitraum 3 wurde abgebucht",
        "Abonnement sub-7 wurde gekündigt",
    }
    body = by_subject["Abonnement sub-7: Zeitraum 3 wurde abgebucht"].get_payload(decode=True)
    assert isinstance(body, bytes)
    assert body.decode().splitlines()[:4] == [
        "Abonnement: sub-7",
        "Status: active",
        "Zeitraum: 3",
        f"Zahlungsadresse: {escrow}",
    ]


async def test_events_the_owner_did_not_choose_are_not_mailed(
    services: Services, fake: FakeChain, smtp: SmtpServer
) -> None:
    owner = await owner_mailing(services, "owner@shop.example", ("invoice.expired",))

    await paid_invoice(services, fake, owner)
    await mail_worker.send_due(services, mail_worker.mailer_for(services.settings))  # type: ignore[arg-type]

    assert await messages(services) == []
    assert smtp.inbox.received == []


async def test_an_smtp_server_that_is_down_loses_nothing(
    services: Services, fake: FakeChain, smtp: SmtpServer
) -> None:
    mailer = mail_worker.mailer_for(services.settings)
    assert mailer is not None
    owner = await owner_mailing(services, "owner@shop.example", ("invoice.paid",))
    smtp.stop()

    invoice = await paid_invoice(services, fake, owner)
    first = await mail_worker.send_due(services, mailer)
    (waiting,) = await messages(services)
    early = await mail_worker.send_due(services, mailer)  # before the retry delay: nothing
    smtp.start()
    clock_of(services).advance(int(services.settings.mail_retry_delay_s * 1000))
    second = await mail_worker.send_due(services, mailer)
    again = await mail_worker.send_due(services, mailer)

    assert (first, early, second, again) == (1, 0, 1, 0)
    assert (waiting.status, waiting.attempts) == ("pending", 1)
    assert waiting.last_error is not None and "ConnectionRefusedError" in waiting.last_error
    assert waiting.next_attempt_at == waiting.created_at + 60_000
    (received,) = smtp.inbox.received
    assert invoice.invoice_id in str(received.message["Subject"])
    (row,) = await messages(services)
    assert (row.status, row.attempts, row.last_error) == ("sent", 2, None)


async def test_housekeeping_prunes_sent_mail_past_the_retention_and_keeps_pending_mail(
    services: Services, fake: FakeChain, smtp: SmtpServer
) -> None:
    mailer = mail_worker.mailer_for(services.settings)
    assert mailer is not None
    owner = await owner_mailing(services, "owner@shop.example", ("invoice.paid",))
    await paid_invoice(services, fake, owner)
    await mail_worker.send_due(services, mailer)  # sent
    smtp.stop()
    await paid_invoice(services, fake, owner)
    await mail_worker.send_due(services, mailer)  # pending, attempt 1 failed

    clock_of(services).advance(int(services.settings.webhook_event_retention_s * 1000) + 1)
    await housekeeping.run_once(services)

    assert [(m.status, m.attempts) for m in await messages(services)] == [("pending", 1)]
