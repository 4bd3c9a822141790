"""The outbound webhook client: SSRF guard, pinned connect address, no redirects, timeout.

The wire is real (a local asyncio HTTP server, ``tests/support/local_http.py``); only name
resolution and the connect step are swapped so that "public" addresses lead to it.
Connection handling (reuse, fallback across addresses, stale connections) is in
``test_webhook_connections.py``.
"""

from __future__ import annotations

import ipaddress

import pytest

from invoicing import __version__
from invoicing.notifications.client import (
    Delivery,
    FakeWebhookClient,
    HttpWebhookClient,
    Outcome,
    refused_reason,
)
from tests.support.local_http import Connects, LocalServer, make_client

BODY = b'{"status":"paid"}'


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback (IPv4-mapped)"),
        ("::ffff:10.0.0.1", "private (IPv4-mapped)"),
        ("::ffff:93.184.216.34", None),
        # 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD
        ("2002:7f00:1::1", "loopback (6to4)"),
        ("2002:a9fe:a9fe::", "link-local (6to4)"),
        ("2002:c0a8:101::5", "private (6to4)"),
        ("2002:5db8:d822::1", None),
        # NAT64 well-known prefix: the last 32 bits are the IPv4 address
        ("64:ff9b::7f00:1", "loopback (NAT64)"),
        ("64:ff9b::a9fe:a9fe", "link-local (NAT64)"),
        ("64:ff9b::a00:5", "private (NAT64)"),
        ("64:ff9b::5db8:d822", None),
        # Teredo: the client address is the last 32 bits XOR-ed with ones
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (Teredo)"),  # 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:5601:5601", "link-local (Teredo)"),  # 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:f5ff:fffa", "private (Teredo)"),  # 10.0.0.5
        ("2001:0:4136:e378:8000:63bf:a247:27dd", "private"),  # 93.184.216.34: 2001::/23
        ("fec0::1", "site-local"),
        ("feff::1", "site-local"),
        ("fc00::1", "private"),
        ("100.64.0.1", "not globally routable"),
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_refused_reason(address: str, reason: str | None) -> None:
    assert refused_reason(ipaddress.ip_address(address)) == reason


async def test_connects_to_the_checked_address_with_the_original_host_header(
    server: LocalServer,
) -> None:
    connects: Connects = []
    client = make_client(server, "93.184.216.34", connects=connects)

    outcome = await client.send(
        Delivery("http://hooks.example:8080/paid?x=1", BODY, {"x-service-event-id": "e1"})
    )

    assert (outcome.status_code, outcome.error, outcome.delivered) == (204, None, True)
    assert connects == [("93.184.216.34", 8080, None)]
    (request,) = server.requests
    assert request == (
        b"POST /paid?x=1 HTTP/1.1\r\nHost: hooks.example:8080\r\n"
        b"user-agent: invoicing-webhooks/" + __version__.encode() + b"\r\n"
        b"x-service-event-id: e1\r\n"
        b"Content-Length: 17\r\nConnection: keep-alive\r\n\r\n" + BODY
    )
    await client.aclose()


async def test_https_targets_keep_the_host_name_for_tls(server: LocalServer) -> None:
    connects: Connects = []
    client = make_client(server, "2606:4700:4700::1111", connects=connects)

    await client.send(Delivery("https://hooks.example/p", BODY, {}))

    assert connects == [("2606:4700:4700::1111", 443, "hooks.example")]
    assert b"Host: hooks.example\r\n" in server.requests[0]
    await client.aclose()


@pytest.mark.parametrize(
    "addresses",
    [("127.0.0.1",), ("10.0.0.5",), ("169.254.169.254",), ("93.184.216.34", "192.168.0.1")],
)
async def test_private_targets_are_refused_without_a_request(
    server: LocalServer, addresses: tuple[str, ...]
) -> None:
    connects: Connects = []
    client = make_client(server, *addresses, connects=connects)

    outcome = await client.send(Delivery("http://internal.example/hook", BODY, {}))

    assert outcome.status_code is None
    assert outcome.terminal is True
    assert outcome.error == "refused: destination not allowed"
    for address in addresses:
        assert address not in outcome.error
    assert connects == [] and server.requests == []
    await client.aclose()


async def test_private_targets_are_allowed_by_the_development_setting(server: LocalServer) -> None:
    connects: Connects = []
    client = make_client(server, "127.0.0.1", connects=connects, allow_private=True)

    outcome = await client.send(Delivery("http://localhost:9/hook", BODY, {}))

    assert outcome.status_code == 204
    assert connects == [("127.0.0.1", 9, None)]
    await client.aclose()


async def test_redirects_are_not_followed(server: LocalServer) -> None:
    server.answer = (
        b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n"
    )
    client = make_client(server, "93.184.216.34")

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.delivered, outcome.terminal) == (302, False, False)
    assert len(server.requests) == 1
    await client.aclose()


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200),
        (b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\nok", 201),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 202),
        (b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nfail", 500),
    ],
)
async def test_answer_framings(server: LocalServer, answer: bytes, status: int) -> None:
    server.answer = answer
    client = make_client(server, "93.184.216.34")

    outcomes = [await client.send(Delivery("http://hooks.example/", BODY, {})) for _ in range(2)]

    assert [o.status_code for o in outcomes] == [status, status]
    await client.aclose()


async def test_a_garbage_answer_is_a_retryable_error(server: LocalServer) -> None:
    server.answer = b"SMTP ready\r\n\r\n"
    client = make_client(server, "93.184.216.34")

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.terminal) == (None, False)
    assert outcome.error == "ProtocolError: not an HTTP/1.x status line: 'SMTP ready'"
    await client.aclose()


async def test_a_slow_endpoint_times_out(server: LocalServer) -> None:
    server.delay_s = 5
    client = make_client(server, "93.184.216.34", timeout_s=0.1)

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.error, outcome.terminal) == (
        None,
        "timeout after 0.1 s",
        False,
    )
    assert 90 <= outcome.duration_ms < 1000
    await client.aclose()


async def test_unresolvable_host_is_a_retryable_error(server: LocalServer) -> None:
    async def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    client = HttpWebhookClient(resolver=fail)

    outcome = await client.send(Delivery("http://nowhere.invalid/", BODY, {}))

    assert outcome.status_code is None and outcome.terminal is False
    assert outcome.error == (
        "ConnectionError: cannot resolve nowhere.invalid: Name or service not known"
    )
    await client.aclose()


async def test_connection_refused_is_retryable() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    client = HttpWebhookClient(resolver=resolve, allow_private=True)

    outcome = await client.send(Delivery("http://hooks.example:1/", BODY, {}))

    assert (outcome.status_code, outcome.terminal) == (None, False)
    assert outcome.error is not None and outcome.error.startswith("ConnectionRefusedError")
    await client.aclose()


async def test_header_values_with_line_breaks_are_not_sent(server: LocalServer) -> None:
    client = make_client(server, "93.184.216.34")

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {"x-a": "1\r\nx-b: 2"}))

    assert outcome.status_code is None
    assert outcome.error == "ValueError: header 'x-a' contains a line break"
    assert server.requests == []
    await client.aclose()


@pytest.mark.parametrize("url", ["ftp://hooks.example/", "/relative", "http:///nohost"])
async def test_non_http_urls_are_refused(server: LocalServer, url: str) -> None:
    client = make_client(server, "93.184.216.34")

    outcome = await client.send(Delivery(url, BODY, {}))

    assert outcome.terminal is True
    assert outcome.error == "refused: webhookUrl must be an absolute http(s) URL"
    await client.aclose()


async def test_fake_client_answers_from_its_script() -> None:
    fake = FakeWebhookClient(answers=[Outcome(status_code=500)])

    first = await fake.send(Delivery("http://a/", BODY, {}))
    second = await fake.send(Delivery("http://a/", BODY, {}))

    assert (first.status_code, second.status_code) == (500, 200)
    assert len(fake.sent) == 2
