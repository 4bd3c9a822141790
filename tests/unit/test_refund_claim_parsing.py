"""The refund claim page parses what strangers send: the posted form and the address in it.
Whatever the bytes, the answer is an EIP-55 address the payer meant or a 400 naming the
``address`` field, never another error."""

from __future__ import annotations

from urllib.parse import urlencode

from eth_utils import to_checksum_address
from hypothesis import given
from hypothesis import strategies as st

from invoicing.errors import InvalidRequest
from invoicing.refunds.claims import parse_claim_address
from invoicing.web.page.claim import claim_form

ADDRESS_BYTES = st.binary(min_size=20, max_size=20).filter(lambda b: any(b))


@given(ADDRESS_BYTES, st.sampled_from(["lower", "upper", "checksum"]), st.text(" \t\n", max_size=3))
def test_an_address_in_any_accepted_case_parses_to_its_checksum(
    raw: bytes, case: str, space: str
) -> None:
    checksummed = to_checksum_address(raw)
    digits = {"lower": raw.hex(), "upper": raw.hex().upper(), "checksum": checksummed[2:]}[case]
    assert parse_claim_address(space + "0x" + digits + space) == checksummed


@given(st.text(max_size=200))
def test_any_text_parses_to_a_checksummed_address_or_a_400(text: str) -> None:
    try:
        address = parse_claim_address(text)
    except InvalidRequest as exc:
        assert exc.status == 400 and exc.details == {"field": "address"}
        return
    assert address == to_checksum_address(text.strip())
    assert address != "0x" + "0" * 40


@given(ADDRESS_BYTES, st.integers(min_value=0, max_value=39))
def test_a_mistyped_checksum_is_refused(raw: bytes, at: int) -> None:
    checksummed = to_checksum_address(raw)
    digit = checksummed[2 + at]
    if not digit.isalpha():
        return
    flipped = checksummed[: 2 + at] + digit.swapcase() + checksummed[3 + at :]
    if flipped[2:] in (flipped[2:].lower(), flipped[2:].upper()):
        return  # all one case: accepted without a checksum, by design
    try:
        parse_claim_address(flipped)
    except InvalidRequest:
        return
    raise AssertionError(f"{flipped} was accepted")


@given(st.binary(max_size=2000))
def test_any_body_is_read_or_refused_with_a_400(body: bytes) -> None:
    try:
        value = claim_form(body)
    except InvalidRequest as exc:
        assert exc.details == {"field": "address"}
        return
    assert isinstance(value, str)


@given(st.text(max_size=100))
def test_the_address_field_comes_back_as_sent(text: str) -> None:
    assert claim_form(urlencode({"address": text, "other": "x"}).encode()) == text
