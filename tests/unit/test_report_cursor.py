"""The payments report's cursor and row key, as a caller hands them back: any text decodes
to a cursor of this report or to None, never to an error, and what the report encodes
decodes to itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.reports.payments import PaymentRow, decode_cursor, encode_cursor
from invoicing.reports.sources import KEY_SEPARATOR, split_key

_HEX = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "0x" + h)
_SOURCE = st.one_of(
    st.just("tx"),
    st.integers(0, 10**6).map(lambda i: f"log:{i}"),
    st.lists(st.integers(0, 999), min_size=1, max_size=8).map(
        lambda path: "trace:" + ",".join(map(str, path))
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_cursor_decodes_to_a_row_key_or_none(text: str) -> None:
    found = decode_cursor(text)
    if found is None:
        return
    paid_at, key = found
    assert paid_at >= 0 and 0 < len(key) <= 200
    parts = split_key(key)
    assert parts is None or (len(parts) == 3 and all(parts))


@given(st.integers(0, 2**53), st.uuids(), _HEX, _SOURCE)
def test_a_cursor_decodes_to_the_row_it_encodes(
    paid_at: int, invoice_pk: object, tx_hash: str, source: str
) -> None:
    key = KEY_SEPARATOR.join((str(invoice_pk), tx_hash, source))
    row = PaymentRow(
        "order-1", "0x" + "ab" * 20, 1, "native", "1", paid_at, tx_hash, "0x" + "cd" * 20,
        "", "", "", "", "", key,
    )  # fmt: skip

    decoded = decode_cursor(encode_cursor(row))

    assert decoded == (paid_at, key)
    assert split_key(key) == (str(invoice_pk), tx_hash, source)
