"""Endpoint keys, hosts, failure streaks and the per-host cap (pure functions)."""

from __future__ import annotations

import hashlib

from invoicing.notifications.delivery import within_host_cap
from invoicing.notifications.endpoints import endpoint_host, endpoint_key, tally


def test_an_endpoint_is_its_url_and_its_key_the_urls_sha256() -> None:
    url = "https://shop.example/hooks/paid?x=1"

    assert endpoint_key(url) == hashlib.sha256(url.encode()).hexdigest()
    assert endpoint_key(url) != endpoint_key("https://shop.example/hooks/paid?x=2")


def test_the_host_is_host_and_port_with_the_schemes_default() -> None:
    assert endpoint_host("https://Shop.Example/a") == "shop.example:443"
    assert endpoint_host("http://shop.example/a") == "shop.example:80"
    assert endpoint_host("http://127.0.0.1:9000/a") == "127.0.0.1:9000"
    assert endpoint_host("http://[::1]:9000/a") == "::1:9000"
    assert endpoint_host("http://shop.example:99999/a") == "shop.example:80"  # bad port


def test_tally_counts_only_the_failures_after_the_last_success() -> None:
    a, b, c = "https://a.example/", "https://b.example/", "https://c.example/"

    succeeded, failures = tally(
        [(a, False), (a, True), (a, False), (b, False), (b, False), (c, False), (c, True)]
    )

    assert succeeded == {endpoint_key(a), endpoint_key(c)}
    assert failures == {endpoint_key(a): 1, endpoint_key(b): 2}


def test_the_host_cap_leaves_out_only_what_would_exceed_it() -> None:
    rows = [("e1", "a:443"), ("e2", "a:443"), ("e3", "b:443"), ("e4", "a:443"), ("e1", "a:443")]

    assert within_host_cap(rows, {"a:443": 1}, cap=3) == ["e1", "e2", "e3"]
    assert within_host_cap(rows, {}, cap=3) == ["e1", "e2", "e3", "e4"]
    assert within_host_cap(rows, {"b:443": 3}, cap=3) == ["e1", "e2", "e4"]
