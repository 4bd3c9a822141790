"""Reading a fiat price from a stranger: the ISO 4217 ``currency`` and the ``amount`` in it.

The currency codes and their minor units come from the CLDR data Babel ships (ISO 4217, with
historical codes); ``XXX`` (no currency) and ``XTS`` (testing) are not prices. An amount is a
positive decimal string with at most as many fraction digits as the currency has minor units
(``"19.99"`` USD, ``"1500"`` JPY). Both are parsed here and nowhere else, and
``tests/unit/test_pricing_parse.py`` holds them to that with hypothesis.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal

from babel.numbers import get_currency_precision, list_currencies

from invoicing.errors import InvalidRequest, UnknownCurrency

_CODE = re.compile(r"^[A-Z]{3}$")
_AMOUNT = re.compile(r"^[0-9]+(\.[0-9]+)?$")
NOT_PRICES = frozenset({"XXX", "XTS"})
MAX_AMOUNT_CHARS = 40


@functools.cache
def known_currencies() -> frozenset[str]:
    """Every ISO 4217 code a price may be given in."""
    return frozenset(code for code in list_currencies() if _CODE.match(code)) - NOT_PRICES


def parse_currency(code: object) -> str:
    """``"USD"`` → ``"USD"``; anything that is not a known ISO 4217 code (lower case
    included: codes are written in capitals) → UnknownCurrency."""
    if not isinstance(code, str) or not _CODE.match(code) or code not in known_currencies():
        raise UnknownCurrency(
            "currency must be an ISO 4217 code such as USD or EUR", {"field": "currency"}
        )
    return code


def minor_units(currency: str) -> int:
    """The digits after the decimal point the currency has (USD 2, JPY 0, BHD 3)."""
    return int(get_currency_precision(currency))


def parse_fiat_amount(amount: object, currency: str) -> Decimal:
    """``"19.99"`` in USD → ``Decimal("19.99")``: positive, no sign or exponent, no more
    fraction digits than the currency's minor units, at most 40 characters."""
    if not isinstance(amount, str) or len(amount) > MAX_AMOUNT_CHARS or not _AMOUNT.match(amount):
        raise InvalidRequest(
            'amount must be a positive decimal string such as "19.99"', {"field": "amount"}
        )
    digits = minor_units(currency)
    fraction = amount.partition(".")[2]
    if len(fraction) > digits:
        raise InvalidRequest(
            f"amount has more than {digits} fraction digits for {currency}",
            {"field": "amount", "currency": currency, "minorUnits": digits},
        )
    value = Decimal(amount)
    if value == 0:
        raise InvalidRequest("amount must be greater than zero", {"field": "amount"})
    return value
