"""Which address a public route counts a client by: the socket's peer, or behind a trusted
proxy the right-most X-Forwarded-For address that is not itself a trusted proxy."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from starlette.requests import Request

from invoicing.settings import Settings
from invoicing.web.context import client_address, client_network

PROXIES = "10.0.0.0/8, ::1/128"


def request_from(peer: str, *forwarded: str) -> Request:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return Request({"type": "http", "client": (peer, 40000), "headers": headers})


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "client"),
    [
        ("203.0.113.5", ["198.51.100.1"], "", "203.0.113.5"),  # no proxies: the socket
        ("203.0.113.5", ["198.51.100.1"], PROXIES, "203.0.113.5"),  # untrusted peer
        ("10.1.1.1", ["198.51.100.1"], PROXIES, "198.51.100.1"),
        ("10.1.1.1", ["6.6.6.6, 198.51.100.1, 10.2.2.2"], PROXIES, "198.51.100.1"),
        ("10.1.1.1", ["6.6.6.6", "198.51.100.1"], PROXIES, "198.51.100.1"),  # two headers
        ("::1", ["2001:db8::7"], PROXIES, "2001:db8::7"),
        ("10.1.1.1", ["not-an-ip, 10.2.2.2"], PROXIES, "10.2.2.2"),  # garbage stops the walk
        ("10.1.1.1", [], PROXIES, "10.1.1.1"),  # a trusted peer that forwarded nothing
        ("10.1.1.1", ["10.2.2.2, 10.3.3.3"], PROXIES, "10.2.2.2"),  # all hops trusted
    ],
)
def test_client_address(peer: str, forwarded: list[str], trusted: str, client: str) -> None:
    assert client_address(request_from(peer, *forwarded), trusted) == client


def test_a_bad_trusted_proxy_range_stops_the_service_at_start() -> None:
    with pytest.raises(ValidationError, match="'10.0.0.0/33' is not a CIDR"):
        Settings(environment="development", trusted_proxies="127.0.0.1/32,10.0.0.0/33")


@pytest.mark.parametrize(
    ("peer", "network"),
    [
        ("203.0.113.5", "203.0.113.5"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),  # the same subscriber's /64
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),  # the next /64 is another client
        ("::ffff:203.0.113.5", "203.0.113.5"),  # IPv4-mapped: its IPv4 address
        ("fe80::1%eth0", "fe80::/64"),
        ("unknown", "unknown"),
    ],
)
def test_public_routes_count_a_client_by_its_ipv4_address_or_its_ipv6_64(
    peer: str, network: str
) -> None:
    assert client_network(request_from(peer), "") == network
