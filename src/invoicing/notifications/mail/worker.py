"""The mail worker: claims due messages under a lease, sends them, records the result.

A claim bumps a message's attempt number and leases it for ``smtp_timeout_s`` times the
steps of a send plus a margin, in one transaction under ``FOR UPDATE SKIP LOCKED``: two
workers never send the same attempt, and one that dies mid-send loses the lease to another.
A result is written only while the claim holds (same attempt number). A message the server
did not take is tried again after ``mail_retry_delay_s``, doubling up to
``mail_retry_max_delay_s``, ``mail_max_attempts`` times in all; one the server refused for
good (5xx) is given up at once. Without ``INVOICING_SMTP_URL`` the worker does not run and
messages wait in the outbox.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError

from invoicing.notifications.mail.smtp import (
    Mailer,
    MailNotSent,
    MailRefused,
    OutgoingMail,
    SmtpMailer,
    SmtpServer,
)
from invoicing.notifications.mail.texts import subject_and_body, subscription_subject_and_body
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.mail import MailMessage, MailStatus

log = logging.getLogger(__name__)

CLAIM_SIZE = 20
LEASE_MARGIN_S = 30.0
# A send is a handful of exchanges (connect, greet, TLS, login, envelope, data, quit).
SEND_STEPS = 8


@dataclass(frozen=True)
class Claimed:
    id: str
    attempt: int
    mail: OutgoingMail


def mailer_for(settings: Settings) -> Mailer | None:
    if settings.smtp_url is None or settings.smtp_from is None:
        return None
    server = SmtpServer.of_url(settings.smtp_url.get_secret_value())
    return SmtpMailer(server, settings.smtp_from, settings.smtp_timeout_s)


async def run(services: Services, stop: asyncio.Event, mailer: Mailer | None = None) -> None:
    """Send due mail until ``stop`` is set (nothing to do without an SMTP server)."""
    mailer = mailer or mailer_for(services.settings)
    if mailer is None:
        await stop.wait()
        return
    poll_s = services.settings.mail_poll_interval_s
    while not stop.is_set():
        try:
            sent = await send_due(services, mailer)
        except (SQLAlchemyError, OSError) as exc:
            log.warning("mail worker: database error (%s)", exc)
            sent = 0
        if sent < CLAIM_SIZE:
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll_s)
            except TimeoutError:
                pass


async def send_due(services: Services, mailer: Mailer) -> int:
    """Claim due messages, send each, record the results; returns how many were claimed."""
    claimed = await claim(services)
    results = await asyncio.gather(*(_attempt(mailer, c) for c in claimed))
    for message, error in zip(claimed, results, strict=True):
        await record(services, message, error)
    return len(claimed)


async def _attempt(mailer: Mailer, message: Claimed) -> MailNotSent | None:
    try:
        await mailer.send(message.mail)
    except MailNotSent as exc:
        return exc
    return None


async def claim(services: Services) -> list[Claimed]:
    settings = services.settings
    now_ms = services.clock.now_ms()
    lease_ms = int((settings.smtp_timeout_s * SEND_STEPS + LEASE_MARGIN_S) * 1000)
    async with services.db.transaction() as session:
        rows = list(
            await session.scalars(
                select(MailMessage)
                .where(
                    MailMessage.status == MailStatus.PENDING,
                    MailMessage.next_attempt_at <= now_ms,
                    MailMessage.claimed_until <= now_ms,
                )
                .order_by(MailMessage.next_attempt_at, MailMessage.id)
                .limit(CLAIM_SIZE)
                .with_for_update(skip_locked=True)
            )
        )
        for row in rows:
            row.attempts += 1
            row.claimed_until = now_ms + lease_ms
        return [Claimed(row.id, row.attempts, _mail_of(row)) for row in rows]


def _mail_of(row: MailMessage) -> OutgoingMail:
    subscription = row.data.get("subscription")
    if isinstance(subscription, dict):
        subject, body = subscription_subject_and_body(row.event_type, row.language, subscription)
    else:
        subject, body = subject_and_body(row.event_type, row.language, row.data.get("invoice", {}))
    return OutgoingMail(row.recipient, subject, body, row.id)


async def record(services: Services, message: Claimed, error: MailNotSent | None) -> None:
    """Write one attempt's result, only while the claim still holds."""
    settings = services.settings
    now_ms = services.clock.now_ms()
    values: dict[str, object] = {"claimed_until": 0}
    if error is None:
        values.update(status=MailStatus.SENT, sent_at=now_ms, last_error=None)
    else:
        last = isinstance(error, MailRefused) or message.attempt >= settings.mail_max_attempts
        values.update(
            status=MailStatus.FAILED if last else MailStatus.PENDING,
            next_attempt_at=now_ms + retry_delay_ms(settings, message.attempt),
            last_error=str(error)[:500],
        )
        log.warning("mail %s attempt %d not sent: %s", message.id, message.attempt, error)
    async with services.db.transaction() as session:
        await session.execute(
            update(MailMessage)
            .where(MailMessage.id == message.id, MailMessage.attempts == message.attempt)
            .values(**values)
        )


def retry_delay_ms(settings: Settings, attempt: int) -> int:
    """The wait after failed attempt number ``attempt`` (1-based)."""
    base_ms = int(settings.mail_retry_delay_s * 1000)
    cap_ms = int(settings.mail_retry_max_delay_s * 1000)
    return min(cap_ms, base_ms << min(attempt - 1, 40))
