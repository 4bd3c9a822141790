"""A real SMTP server for tests (aiosmtpd, on its own thread): it keeps every message it
takes, and can be stopped and started again on the same port."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Received:
    sender: str
    recipients: list[str]
    message: Message


@dataclass
class Inbox:
    """What the server took, in order."""

    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)  # set by each message

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802
        self.received.append(
            Received(
                envelope.mail_from,
                list(envelope.rcpt_tos),
                message_from_bytes(
                    envelope.original_content or envelope.content, policy=policy.default
                ),
            )
        )
        self.arrived.set()
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SmtpServer:
    """``url`` for ``INVOICING_SMTP_URL``; ``stop()`` and ``start()`` take it down and up."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        self.port = free_port()
        self.url = f"smtp://127.0.0.1:{self.port}"
        self._controller: Controller | None = None

    def start(self) -> None:
        self._controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
