"""The fiat price a stranger sends: ``currency`` (ISO 4217) and ``amount`` in it.

Examples of each refusal, then properties: every string either parses to the exact decimal
it spells or is refused with a 400 in the documented shape (never another exception)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.errors import InvalidRequest, UnknownCurrency
from invoicing.pricing.currencies import (
    known_currencies,
    minor_units,
    parse_currency,
    parse_fiat_amount,
)


def test_known_codes_parse_as_themselves() -> None:
    assert [parse_currency(c) for c in ("USD", "EUR", "JPY", "BHD")] == [
        "USD",
        "EUR",
        "JPY",
        "BHD",
    ]


@pytest.mark.parametrize("code", ["usd", "US", "USDT", "ABC", "XXX", "XTS", "", " USD", 840])
def test_anything_else_is_an_unknown_currency(code: object) -> None:
    with pytest.raises(UnknownCurrency) as refused:
        parse_currency(code)
    assert refused.value.status == 400
    assert refused.value.body()["error"]["details"] == {"field": "currency"}


@pytest.mark.parametrize(
    ("amount", "currency", "value"),
    [("19.99", "USD", "19.99"), ("1500", "JPY", "1500"), ("0.001", "BHD", "0.001")],
)
def test_amounts_parse_exactly(amount: str, currency: str, value: str) -> None:
    assert parse_fiat_amount(amount, currency) == Decimal(value)


@pytest.mark.parametrize(
    ("amount", "currency", "problem"),
    [
        ("19.999", "USD", "more than 2 fraction digits for USD"),
        ("1.5", "JPY", "more than 0 fraction digits for JPY"),
        ("0", "USD", "greater than zero"),
        ("0.00", "USD", "greater than zero"),
        ("-1", "USD", "positive decimal string"),
        ("1e3", "USD", "positive decimal string"),
        ("1,50", "EUR", "positive decimal string"),
        (".5", "USD", "positive decimal string"),
        ("1" * 41, "USD", "positive decimal string"),
        (19.99, "USD", "positive decimal string"),
    ],
)
def test_bad_amounts_are_refused(amount: object, currency: str, problem: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_fiat_amount(amount, currency)
    assert type(refused.value) is InvalidRequest and refused.value.status == 400
    assert problem in refused.value.message


@given(st.text(max_size=6))
def test_a_currency_is_known_or_refused(code: str) -> None:
    try:
        parsed = parse_currency(code)
    except UnknownCurrency:
        assert code not in known_currencies()
    else:
        assert parsed == code and code in known_currencies()


@given(st.text(max_size=50), st.sampled_from(["USD", "JPY", "BHD", "EUR"]))
def test_any_amount_text_parses_to_what_it_spells_or_is_refused(text: str, currency: str) -> None:
    try:
        value = parse_fiat_amount(text, currency)
    except InvalidRequest as refused:
        assert refused.status == 400 and refused.details is not None
    else:
        assert value > 0 and Decimal(text) == value
        assert -value.as_tuple().exponent <= minor_units(currency)  # type: ignore[operator]


@given(
    st.integers(min_value=1, max_value=10**30),
    st.sampled_from(["USD", "JPY", "BHD"]),
    st.integers(min_value=0, max_value=3),
)
def test_every_price_within_the_minor_units_parses(units: int, currency: str, shift: int) -> None:
    places = min(shift, minor_units(currency))
    whole, fraction = divmod(units, 10**places)
    text = f"{whole}.{str(fraction).rjust(places, '0')}" if places else str(whole)
    assert Fraction(parse_fiat_amount(text, currency)) == Fraction(units, 10**places)
