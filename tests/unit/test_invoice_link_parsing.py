"""redirectUrl / cancelUrl parsing (``invoices.links``): examples and properties over any
text a stranger may send."""

from __future__ import annotations

import hashlib
import json
import string
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.invoices.create import NewInvoice
from invoicing.invoices.links import MAX_URL_CHARS, link_problem, shop_name_of

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
PATH = st.text(
    alphabet=string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/%?#", max_size=200
)


@given(
    st.sampled_from(["http", "https", "HTTPS"]),
    HOST,
    st.one_of(st.none(), st.integers(1, 65535)),
    PATH,
)
def test_plain_web_addresses_are_accepted(
    scheme: str, host: str, port: int | None, path: str
) -> None:
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}/{path}"
    if len(url) > MAX_URL_CHARS:
        return
    problem = link_problem(url, require_https=False)

    assert problem is None, (url, problem)
    assert (link_problem(url, require_https=True) is None) == (scheme.lower() == "https")


@given(st.text(max_size=300))
def test_any_text_is_judged_without_raising_and_what_passes_is_a_web_address(text: str) -> None:
    for require_https in (False, True):
        if link_problem(text, require_https=require_https) is None:
            parts = urlsplit(text)
            assert parts.scheme.lower() in (("https",) if require_https else ("http", "https"))
            assert parts.hostname and parts.username is None and parts.password is None
            assert len(text) <= MAX_URL_CHARS and text.isascii() and text.isprintable()
            assert " " not in text and "\\" not in text


@given(st.from_regex(r"[a-zA-Z][a-zA-Z0-9+.-]{0,15}", fullmatch=True), HOST, PATH)
def test_every_other_scheme_is_refused(scheme: str, host: str, path: str) -> None:
    url = f"{scheme}://{host}/{path}"
    if scheme.lower() in ("http", "https"):
        return
    assert link_problem(url, require_https=False) == "must be an http or https URL"


@given(st.integers(min_value=MAX_URL_CHARS + 1, max_value=MAX_URL_CHARS + 5000))
def test_over_long_links_are_refused(length: int) -> None:
    url = "https://shop.example/" + "a" * (length - len("https://shop.example/"))
    assert link_problem(url, require_https=True) == "must be at most 2048 characters"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("javascript:alert(1)", "must be an http or https URL"),
        ("data:text/html,hi", "must be an http or https URL"),
        ("vbscript:msgbox", "must be an http or https URL"),
        ("https:shop.example", "must be an absolute URL with a host"),
        ("https:///path", "must be an absolute URL with a host"),
        ("https://user@shop.example/", "must not contain credentials"),
        ("https://shop.example\\@evil.example/", "must not contain a backslash"),
        (
            "https://shop.example/\x00",
            "must be printable ASCII without spaces (percent-encode the rest)",
        ),
        ("https://[::1/", "is not a valid URL"),
        ("https://shop.example:0/", "is not a valid URL"),
    ],
)
def test_examples(url: str, problem: str) -> None:
    assert link_problem(url, require_https=False) == problem


def test_shop_name_is_the_host() -> None:
    assert shop_name_of("https://www.Shop.example:8443/thanks") == "shop.example"
    assert shop_name_of("http://127.0.0.1:9000/") == "127.0.0.1"


def test_an_invoice_without_links_keeps_the_request_hash_it_had_before_them() -> None:
    """An identical retry of an invoice created before these fields existed still matches."""
    invoice = NewInvoice("0x" + "11" * 20, 1, "2.5", "order-1", description="d")
    before = {
        "chainId": 1,
        "amount": "2.5",
        "tokenAddress": None,
        "webhookUrl": None,
        "description": "d",
        "expiresAt": None,
        "metadata": None,
    }
    expected = hashlib.sha256(
        json.dumps(before, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()

    assert invoice.request_hash() == expected
    linked = NewInvoice(
        "0x" + "11" * 20, 1, "2.5", "order-1", description="d", redirect_url="https://a.example/"
    )
    assert linked.request_hash() != expected
