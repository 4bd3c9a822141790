"""What a request tells the web layer about where it runs and who sent it: the app's
``Services``, and the client address a public route counts its caller by.

The client address is the socket's peer, unless that peer is a trusted reverse proxy
(``INVOICING_TRUSTED_PROXIES``); then the right-most ``X-Forwarded-For`` address that is not
itself a trusted proxy, so a client cannot choose its own rate-limit key by sending the header.
A public route counts its client by the address's network (``client_network``): an IPv4
address alone, an IPv6 address by its /64, the least a single subscriber is given, so a
client cannot multiply its limit by rotating through the addresses of its own prefix.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import HTTPConnection

from invoicing.services import Services
from invoicing.setting_values import IPNetwork, trusted_networks


def services_of(connection: HTTPConnection) -> Services:
    """The Services of the app serving a request (``create_app`` keeps them on its state)."""
    services: Services = connection.app.state.services
    return services


def client_address(connection: HTTPConnection, trusted_proxies: str) -> str:
    """The address a public route counts its client by (see the module docstring)."""
    peer = connection.client.host if connection.client else "unknown"
    networks = trusted_networks(trusted_proxies)
    if not networks or not _trusted(peer, networks):
        return peer
    forwarded = ",".join(connection.headers.getlist("x-forwarded-for"))
    client = peer
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()]):
        if not _is_address(hop):
            break  # written by someone left of the proxies: keep the last trusted hop
        client = hop
        if not _trusted(hop, networks):
            break
    return client


IPV6_CLIENT_PREFIX = 64


def client_network(connection: HTTPConnection, trusted_proxies: str) -> str:
    """The key a public route counts its client by: the client address's IPv4 address, or
    its IPv6 /64 (``2001:db8:1:2::/64``); an IPv4-mapped address counts as its IPv4."""
    address = client_address(connection, trusted_proxies)
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)


def _trusted(address: str, networks: tuple[IPNetwork, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True
