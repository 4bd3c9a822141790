"""The SSRF guard for webhook targets (docs/architecture.md#delivery).

``checked_target`` resolves a webhook URL's host and refuses the delivery when *any* of its
addresses is loopback, private, link-local, multicast, unspecified, reserved or otherwise
not globally routable (unless the development setting allows them): one bad address among
good ones would let DNS choose the bad one. The answer is a ``Target`` holding every
resolved address, in the resolver's order; the client connects only to those, so DNS
cannot be re-pointed between the check and the connect, while the Host header and the TLS
name (SNI and the certificate check) stay the URL's host name. The resolver is the
client's (``resolver.SystemResolver`` and its cache in production).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


DESTINATION_NOT_ALLOWED = "destination not allowed"


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


NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, and the form that carries it: IPv4-mapped
    (``::ffff:0:0/96``), NAT64 (``64:ff9b::/96``), 6to4 (``2002::/16``) or Teredo
    (``2001::/32``, the client address stored XOR-ed)."""
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address in NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]  # ipaddress undoes the XOR
    return None


def refused_reason(address: IPAddress) -> str | None:
    """Why the guard refuses this address, or None when it is a public unicast address.

    An IPv6 address that carries an IPv4 address is judged by that address first (a NAT64
    or 6to4 gateway would deliver there); IPv4-mapped and NAT64 addresses are only their
    IPv4 address, the tunnel forms must also be public IPv6 addresses themselves."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if embedded is not None:
            form, ipv4 = embedded
            reason = refused_reason(ipv4)
            if reason is not None:
                return f"{reason} ({form})"
            if form in ("IPv4-mapped", "NAT64"):
                return None
        if address.is_site_local:
            return "site-local"
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


def literal_address(host: str) -> IPAddress | None:
    """The address a host name spells without DNS: an IP literal, or an IPv4 address in a
    form the resolver also reads (``2130706433``, ``0x7f.1``, ``127.1``); else None."""
    try:
        return ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        pass
    if host and set(host.lower()) <= set("0123456789abcdefx.") and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def webhook_url_problem(url: str, *, require_https: bool, allow_private: bool) -> str | None:
    """Why ``url`` can never be delivered, decided without a DNS lookup (invoice creation
    refuses it with 400 instead of accepting a webhook that never goes out); None when it
    may be. A name is still resolved and checked at every delivery."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".").lower()
    if parts.scheme not in ("http", "https") or not host:
        return "must be an absolute http(s) URL"
    if require_https and parts.scheme != "https":
        return "must be an https URL"
    if allow_private:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return DESTINATION_NOT_ALLOWED
    address = literal_address(host)
    if address is not None and refused_reason(address) is not None:
        return DESTINATION_NOT_ALLOWED
    return None


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
        verdicts = [address_verdict(a) for a in resolved]
    except (OSError, ValueError) as exc:
        raise ConnectionError(f"cannot resolve {host}: {exc}") from exc
    if not verdicts:
        raise ConnectionError(f"{host} resolves to no address")
    if not allow_private:
        for address, reason in verdicts:
            if reason is not None:
                # The owner reads this error: it must not map the service's network.
                log.warning("webhook to %s refused: %s is %s", host, address, reason)
                raise TargetRefused(DESTINATION_NOT_ALLOWED)
    return Target(
        scheme=parts.scheme,
        host=host,
        port=port,
        path=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
        addresses=tuple(dict.fromkeys(address for address, _ in verdicts)),
        explicit_port=parts.port is not None,
    )


@functools.lru_cache(maxsize=4096)
def address_verdict(resolved: str) -> tuple[str, str | None]:
    """A resolved address (a zone index left out) in its canonical text, and why the guard
    refuses it (None: allowed). Every delivery asks it of the same few addresses, and the
    checks walk the special-purpose ranges: kept per process. ``ValueError`` if it is none."""
    address = ipaddress.ip_address(resolved.split("%")[0])
    return str(address), refused_reason(address)
