"""The SSRF guard for webhook targets (DESIGN section 6).

``checked_target`` resolves a webhook URL's host and refuses the delivery when *any* of its
addresses is loopback, private, link-local, multicast, unspecified, reserved or otherwise
not globally routable (unless the development setting allows them): one bad address among
good ones would let DNS choose the bad one. The answer is a ``Target`` holding every
resolved address, in the resolver's order; the client connects only to those, so DNS
cannot be re-pointed between the check and the connect, while the Host header and the TLS
name (SNI and the certificate check) stay the URL's host name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(Exception):
    """The webhook URL points somewhere the SSRF guard does not allow (terminal)."""


@dataclass(frozen=True)
class Target:
    """A webhook URL whose addresses the guard has checked."""

    scheme: str
    host: str  # the URL's host name: Host header, SNI and certificate name
    port: int
    path: str  # path and query, as sent on the request line
    addresses: tuple[str, ...]  # every resolved address, all checked, in the resolver's order
    explicit_port: bool = False

    @property
    def host_header(self) -> str:
        named = f"[{self.host}]" if ":" in self.host else self.host
        return f"{named}:{self.port}" if self.explicit_port else named

    @property
    def tls_name(self) -> str | None:
        return self.host if self.scheme == "https" else None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.path}"


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


async def checked_target(url: str, resolver: Resolver, allow_private: bool) -> Target:
    """Where ``url`` may be delivered: raises ``TargetRefused`` (never deliver) or
    ``ConnectionError`` (name resolution failed; worth a retry)."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise TargetRefused("webhookUrl must be an absolute http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        resolved = await resolver(host, port)
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in resolved]
    except (OSError, ValueError) as exc:
        raise ConnectionError(f"cannot resolve {host}: {exc}") from exc
    if not addresses:
        raise ConnectionError(f"{host} resolves to no address")
    if not allow_private:
        for address in addresses:
            reason = refused_reason(address)
            if reason is not None:
                raise TargetRefused(f"{host} resolves to {reason} address {address}")
    return Target(
        scheme=parts.scheme,
        host=host,
        port=port,
        path=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
        addresses=tuple(dict.fromkeys(str(a) for a in addresses)),
        explicit_port=parts.port is not None,
    )
