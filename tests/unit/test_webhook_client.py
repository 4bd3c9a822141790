"""The outbound webhook client: SSRF guard, pinned connect address, no redirects, timeout."""

from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest

from invoicing.webhooks.client import (
    Delivery,
    FakeWebhookClient,
    HttpWebhookClient,
    Outcome,
    refused_reason,
)

BODY = b'{"status":"paid"}'


def resolver_to(*addresses: str):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def recording_transport(status: int = 200, seen: list[httpx.Request] | None = None,
                        headers: dict[str, str] | None = None) -> httpx.MockTransport:  # fmt: skip
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, headers=headers or {})

    return httpx.MockTransport(handle)


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
        ("::ffff:127.0.0.1", "loopback"),
        ("fc00::1", "private"),
        ("100.64.0.1", "not globally routable"),
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_refused_reason(address: str, reason: str | None) -> None:
    assert refused_reason(ipaddress.ip_address(address)) == reason


async def test_connects_to_the_checked_address_with_the_original_host_header() -> None:
    seen: list[httpx.Request] = []
    client = HttpWebhookClient(
        transport=recording_transport(204, seen), resolver=resolver_to("93.184.216.34")
    )

    outcome = await client.send(
        Delivery("https://hooks.example:8443/paid?x=1", BODY, {"x-service-event-id": "e1"})
    )

    assert (outcome.status_code, outcome.error, outcome.delivered) == (204, None, True)
    (request,) = seen
    assert str(request.url) == "https://93.184.216.34:8443/paid?x=1"
    assert request.headers["host"] == "hooks.example:8443"
    assert request.headers["x-service-event-id"] == "e1"
    assert request.extensions["sni_hostname"] == "hooks.example"
    assert request.content == BODY
    await client.aclose()


async def test_ipv6_target_is_bracketed() -> None:
    seen: list[httpx.Request] = []
    client = HttpWebhookClient(
        transport=recording_transport(200, seen), resolver=resolver_to("2606:4700:4700::1111")
    )

    await client.send(Delivery("http://hooks.example/p", BODY, {}))

    assert str(seen[0].url) == "http://[2606:4700:4700::1111]/p"
    assert seen[0].headers["host"] == "hooks.example"
    assert "sni_hostname" not in seen[0].extensions
    await client.aclose()


@pytest.mark.parametrize(
    "addresses",
    [("127.0.0.1",), ("10.0.0.5",), ("169.254.169.254",), ("93.184.216.34", "192.168.0.1")],
)
async def test_private_targets_are_refused_without_a_request(addresses: tuple[str, ...]) -> None:
    seen: list[httpx.Request] = []
    client = HttpWebhookClient(
        transport=recording_transport(200, seen), resolver=resolver_to(*addresses)
    )

    outcome = await client.send(Delivery("http://internal.example/hook", BODY, {}))

    assert outcome.status_code is None
    assert outcome.terminal is True
    assert outcome.error is not None and outcome.error.startswith("refused: internal.example")
    assert seen == []
    await client.aclose()


async def test_private_targets_are_allowed_by_the_development_setting() -> None:
    seen: list[httpx.Request] = []
    client = HttpWebhookClient(
        transport=recording_transport(200, seen),
        resolver=resolver_to("127.0.0.1"),
        allow_private=True,
    )

    outcome = await client.send(Delivery("http://localhost:9/hook", BODY, {}))

    assert outcome.status_code == 200
    assert str(seen[0].url) == "http://127.0.0.1:9/hook"
    await client.aclose()


async def test_redirects_are_not_followed() -> None:
    seen: list[httpx.Request] = []
    client = HttpWebhookClient(
        transport=recording_transport(302, seen, {"location": "http://169.254.169.254/"}),
        resolver=resolver_to("93.184.216.34"),
    )

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.delivered, outcome.terminal) == (302, False, False)
    assert len(seen) == 1
    await client.aclose()


async def test_a_slow_endpoint_times_out() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200)

    client = HttpWebhookClient(
        timeout_s=0.1, transport=httpx.MockTransport(slow), resolver=resolver_to("93.184.216.34")
    )

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.error, outcome.terminal) == (
        None,
        "timeout after 0.1 s",
        False,
    )
    assert 90 <= outcome.duration_ms < 1000
    await client.aclose()


async def test_unresolvable_host_is_a_retryable_error() -> None:
    async def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    client = HttpWebhookClient(transport=recording_transport(200), resolver=fail)

    outcome = await client.send(Delivery("http://nowhere.invalid/", BODY, {}))

    assert outcome.status_code is None and outcome.terminal is False
    assert (
        outcome.error
        == "ConnectionError: cannot resolve nowhere.invalid: Name or service not known"
    )
    await client.aclose()


async def test_connection_errors_are_retryable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = HttpWebhookClient(
        transport=httpx.MockTransport(refuse), resolver=resolver_to("93.184.216.34")
    )

    outcome = await client.send(Delivery("http://hooks.example/", BODY, {}))

    assert (outcome.status_code, outcome.error, outcome.terminal) == (
        None,
        "ConnectError: connection refused",
        False,
    )
    await client.aclose()


@pytest.mark.parametrize("url", ["ftp://hooks.example/", "/relative", "http:///nohost"])
async def test_non_http_urls_are_refused(url: str) -> None:
    client = HttpWebhookClient(
        transport=recording_transport(200), resolver=resolver_to("93.184.216.34")
    )

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
