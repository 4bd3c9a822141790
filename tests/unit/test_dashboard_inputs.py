"""What the dashboard reads from a stranger's request besides the SIWE message: the list's
cursor and filters, and form bodies. Any value parses or is refused with a 4xx error; none
raises anything else."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.errors import InvalidRequest
from invoicing.invoices.browse import decode_cursor, encode_cursor
from invoicing.web.dashboard.invoices import FILTER_KEYS, parse_filter
from invoicing.web.dashboard.session import Owner

OWNER = Owner("0x" + "ab" * 20, "0x" + "ab" * 20, "csrf", "session")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_cursor_decodes_or_is_none(text: str) -> None:
    found = decode_cursor(text)
    assert found is None or (isinstance(found[0], int) and 0 < len(found[1]) <= 36)


@given(st.integers(min_value=0, max_value=2**62), st.uuids())
def test_a_cursor_decodes_to_what_it_encodes(created_at: int, invoice_pk: object) -> None:
    row = SimpleNamespace(created_at=created_at, id=str(invoice_pk))
    assert decode_cursor(encode_cursor(row)) == (created_at, str(invoice_pk))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional={key: st.text(max_size=60) for key in FILTER_KEYS}))
def test_any_filter_parses_or_is_refused_as_a_bad_request(params: dict[str, str]) -> None:
    full = {key: params.get(key, "") for key in FILTER_KEYS}
    try:
        query = parse_filter(OWNER, full)
    except InvalidRequest:
        return
    assert query.owner_key == OWNER.key


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"status": "unpaid"}, "status: one of pending, paid, completed, cancelled, expired"),
        ({"chain": "-1"}, "chain: a chain id"),
        ({"token": "0x123"}, 'token: a token address, or "native"'),
        ({"from": "2026-13-01"}, "from: a date as YYYY-MM-DD"),
    ],
)
def test_bad_filters_say_which(params: dict[str, str], problem: str) -> None:
    full = {key: params.get(key, "") for key in FILTER_KEYS}
    with pytest.raises(InvalidRequest) as refused:
        parse_filter(OWNER, full)
    assert refused.value.message == problem
