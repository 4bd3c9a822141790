"""Outbound webhook HTTP behind one small interface (``WebhookClient``).

``HttpWebhookClient`` is the real one: it resolves the target, refuses loopback, private,
link-local, multicast, unspecified and reserved addresses unless the development setting
allows them, and then connects to the very address it checked (the request keeps the URL's
Host header and TLS SNI/certificate name), so DNS cannot be re-pointed between the check and
the connect. The wire work is ``http11.ConnectionPool``, whose ``connect`` step tests swap.
``FakeWebhookClient`` ships beside it for unit tests.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from invoicing.webhooks.http11 import Connect, ConnectionPool, Target, open_streams

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Delivery:
    """One POST of an event to its endpoint."""

    url: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended: a status code, or an error (``terminal`` = never retry)."""

    status_code: int | None = None
    error: str | None = None
    terminal: bool = False
    duration_ms: int = 0

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class WebhookClient(Protocol):
    async def send(self, delivery: Delivery) -> Outcome:
        """POST the delivery once; never raises for network or HTTP failures."""
        ...

    async def aclose(self) -> None: ...


class TargetRefused(Exception):
    """The webhook URL points somewhere the SSRF guard does not allow (terminal)."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (an IP literal resolves to itself)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def refused_reason(address: IPAddress) -> str | None:
    """Why the guard refuses this address, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not globally routable", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


@dataclass
class HttpWebhookClient:
    """Real deliveries: SSRF-checked, no redirects, one overall timeout per attempt."""

    timeout_s: float = 10.0
    allow_private: bool = False
    resolver: Resolver = resolve_host
    connect: Connect = open_streams
    _pool: ConnectionPool = field(init=False)

    def __post_init__(self) -> None:
        self._pool = ConnectionPool(self.connect)

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def checked_target(self, url: str) -> Target:
        """Where to connect for ``url``: a resolved address the guard allows."""
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise TargetRefused("webhookUrl must be an absolute http(s) URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            resolved = await self.resolver(host, port)
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolved]
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise ConnectionError(f"{host} resolves to no address")
        if not self.allow_private:
            for address in addresses:
                reason = refused_reason(address)
                if reason is not None:
                    raise TargetRefused(f"{host} resolves to {reason} address {address}")
        named = f"[{host}]" if ":" in host else host
        return Target(
            address=str(addresses[0]),
            port=port,
            host_header=named if parts.port is None else f"{named}:{parts.port}",
            path=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            tls_name=host if parts.scheme == "https" else None,
        )

    async def send(self, delivery: Delivery) -> Outcome:
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                target = await self.checked_target(delivery.url)
                status = await self._pool.post(target, delivery.headers, delivery.body)
            return Outcome(status_code=status, duration_ms=_since(started))
        except TargetRefused as exc:
            return Outcome(error=f"refused: {exc}", terminal=True, duration_ms=_since(started))
        except TimeoutError:
            return Outcome(error=f"timeout after {self.timeout_s:g} s", duration_ms=_since(started))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError) as exc:
            message = f"{type(exc).__name__}: {exc or 'connection closed'}"
            return Outcome(error=message[:500], duration_ms=_since(started))


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


@dataclass
class FakeWebhookClient:
    """In-memory WebhookClient: records deliveries, answers from a script (default 200)."""

    answers: list[Outcome] = field(default_factory=list)
    default: Outcome = field(default_factory=lambda: Outcome(status_code=200))
    sent: list[Delivery] = field(default_factory=list)

    async def send(self, delivery: Delivery) -> Outcome:
        self.sent.append(delivery)
        return self.answers.pop(0) if self.answers else self.default

    async def aclose(self) -> None:
        return None
