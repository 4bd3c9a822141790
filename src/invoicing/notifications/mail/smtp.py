"""Sending mail: the ``Mailer`` interface, its SMTP implementation and its in-memory fake.

The SMTP server is ``INVOICING_SMTP_URL``: ``smtp://host[:port]`` (port 25 by default),
``smtps://host[:port]`` (TLS from the first byte, 465 by default); ``?starttls=1`` upgrades
a plain connection with STARTTLS before anything else is said, and a user and password in
the URL (``smtp://user:pass@host:587?starttls=1``, percent-encoded) log in. The standard
library's ``smtplib`` speaks to it on a thread, each message on a connection of its own,
every step under ``INVOICING_SMTP_TIMEOUT_S``.

A refusal the server gives for good (a 5xx answer) is :class:`MailRefused`: the worker
gives the message up. Anything else (no connection, a timeout, a 4xx) is
:class:`MailNotSent`: tried again later.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit


class MailNotSent(Exception):
    """The message was not sent this time; it is tried again."""


class MailRefused(MailNotSent):
    """The server refused the message for good (5xx): it is not tried again."""


@dataclass(frozen=True)
class OutgoingMail:
    recipient: str
    subject: str
    body: str
    message_id: str  # the outbox row's id: a resent message keeps its Message-ID


class Mailer(Protocol):
    async def send(self, mail: OutgoingMail) -> None:
        """Send ``mail`` or raise :class:`MailNotSent` (or :class:`MailRefused`)."""


@dataclass(frozen=True)
class SmtpServer:
    """Where and how to send, read from ``INVOICING_SMTP_URL``."""

    host: str
    port: int
    implicit_tls: bool
    starttls: bool
    username: str | None
    password: str | None = field(repr=False)  # never in a log line or a repr

    @classmethod
    def of_url(cls, url: str) -> SmtpServer:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("INVOICING_SMTP_URL must be smtp://host[:port] or smtps://host[:port]")
        query = parse_qs(parts.query)
        starttls = query.get("starttls", ["0"])[-1] in ("1", "true", "yes")
        implicit = parts.scheme == "smtps"
        if implicit and starttls:
            raise ValueError("INVOICING_SMTP_URL: smtps:// is TLS already; drop starttls")
        return cls(
            host=parts.hostname,
            port=parts.port or (465 if implicit else 25),
            implicit_tls=implicit,
            starttls=starttls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )


def compose(mail: OutgoingMail, sender: str, domain: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = mail.recipient
    message["Subject"] = " ".join(mail.subject.split())  # no line break reaches a header
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid(idstring=mail.message_id, domain=domain)
    message.set_content(mail.body)
    return message


class SmtpMailer:
    """Sends each message over a connection of its own, on a thread."""

    def __init__(self, server: SmtpServer, sender: str, timeout_s: float) -> None:
        self.server = server
        self.sender = sender  # the From header: an address, or "Shop <address>"
        self.envelope_from = parseaddr(sender)[1] or sender
        self.timeout_s = timeout_s
        self.domain = self.envelope_from.rpartition("@")[2] or "localhost"

    async def send(self, mail: OutgoingMail) -> None:
        message = compose(mail, self.sender, self.domain)
        await asyncio.to_thread(self._send, message, mail.recipient)

    def _send(self, message: EmailMessage, recipient: str) -> None:
        server = self.server
        try:
            client = self._connect()
            with client:
                if server.starttls:
                    client.starttls(context=ssl.create_default_context())
                if server.username is not None:
                    client.login(server.username, server.password or "")
                client.send_message(message, from_addr=self.envelope_from, to_addrs=[recipient])
        except smtplib.SMTPResponseException as exc:
            reason = f"{exc.smtp_code} {exc.smtp_error!r}"[:300]
            if 500 <= exc.smtp_code < 600:
                raise MailRefused(reason) from exc
            raise MailNotSent(reason) from exc
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            error = MailRefused if all(500 <= c < 600 for c in codes) else MailNotSent
            raise error(f"recipient refused: {codes}") from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise MailNotSent(f"{type(exc).__name__}: {exc}"[:300]) from exc

    def _connect(self) -> smtplib.SMTP:
        server = self.server
        if server.implicit_tls:
            return smtplib.SMTP_SSL(
                server.host,
                server.port,
                timeout=self.timeout_s,
                context=ssl.create_default_context(),
            )
        return smtplib.SMTP(server.host, server.port, timeout=self.timeout_s)


@dataclass
class FakeMailer:
    """Keeps what it is handed; ``down`` makes every send fail (tried again later)."""

    sent: list[OutgoingMail] = field(default_factory=list)
    down: bool = False

    async def send(self, mail: OutgoingMail) -> None:
        if self.down:
            raise MailNotSent("the fake server is down")
        self.sent.append(mail)
