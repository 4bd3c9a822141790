"""Outbound webhook HTTP behind one small interface (``WebhookClient``).

``HttpWebhookClient`` is the real one: it resolves the target, refuses loopback, private,
link-local, multicast, unspecified and reserved addresses unless the development setting
allows them, and then connects to the very address it checked (the URL keeps its Host header
and TLS SNI/certificate name), so DNS cannot be re-pointed between the check and the connect.
``FakeWebhookClient`` ships beside it for unit tests.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

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


def _netloc(address: IPAddress, port: int | None) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return host if port is None else f"{host}:{port}"


@dataclass
class HttpWebhookClient:
    """Real deliveries over httpx: no redirects, one overall timeout per attempt."""

    timeout_s: float = 10.0
    allow_private: bool = False
    transport: httpx.AsyncBaseTransport | None = None
    resolver: Resolver = resolve_host
    max_connections: int = 200
    _http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(
            transport=self.transport,
            follow_redirects=False,
            timeout=httpx.Timeout(self.timeout_s),
            limits=httpx.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=self.max_connections,
            ),
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def checked_target(self, url: str) -> tuple[str, str, str | None]:
        """(URL to connect to with the checked IP in it, Host header, TLS server name)."""
        parts = urlsplit(url)
        host = parts.hostname
        if parts.scheme not in ("http", "https") or not host:
            raise TargetRefused("webhookUrl must be an absolute http(s) URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = [
                ipaddress.ip_address(a.split("%")[0]) for a in await self.resolver(host, port)
            ]
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise ConnectionError(f"{host} resolves to no address")
        if not self.allow_private:
            for address in addresses:
                reason = refused_reason(address)
                if reason is not None:
                    raise TargetRefused(f"{host} resolves to {reason} address {address}")
        target = urlunsplit(
            (parts.scheme, _netloc(addresses[0], parts.port), parts.path or "/", parts.query, "")
        )
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        if ":" in host and parts.port is None:
            host_header = f"[{host}]"
        elif ":" in host:
            host_header = f"[{host}]:{parts.port}"
        return target, host_header, host if parts.scheme == "https" else None

    async def send(self, delivery: Delivery) -> Outcome:
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                target, host_header, server_name = await self.checked_target(delivery.url)
                status = await self._post(delivery, target, host_header, server_name)
            return Outcome(status_code=status, duration_ms=_since(started))
        except TargetRefused as exc:
            return Outcome(error=f"refused: {exc}", terminal=True, duration_ms=_since(started))
        except TimeoutError:
            return Outcome(error=f"timeout after {self.timeout_s:g} s", duration_ms=_since(started))
        except (httpx.HTTPError, ConnectionError) as exc:
            message = str(exc) or type(exc).__name__
            return Outcome(
                error=f"{type(exc).__name__}: {message}"[:500], duration_ms=_since(started)
            )

    async def _post(
        self, delivery: Delivery, target: str, host_header: str, server_name: str | None
    ) -> int:
        request = self._http.build_request(
            "POST",
            target,
            content=delivery.body,
            headers={**delivery.headers, "host": host_header},
            extensions={"sni_hostname": server_name} if server_name else {},
        )
        # The body of the answer is never read: only the status code matters.
        response = await self._http.send(request, stream=True)
        await response.aclose()
        return response.status_code


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
