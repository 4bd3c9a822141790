"""Exact conversions between decimal amount strings and raw integer units."""

from __future__ import annotations

import re

from invoicing.errors import InvalidRequest

AMOUNT_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)?$")
MAX_RAW = 2**256 - 1


def to_raw(amount: str, decimals: int) -> int:
    """``"1.5"`` with 6 decimals → ``1500000``. Refuses zero, signs, exponents and excess digits."""
    if not isinstance(amount, str) or len(amount) > 100 or not AMOUNT_PATTERN.match(amount):
        raise InvalidRequest(
            'amount must be a positive decimal string such as "1.5"', {"field": "amount"}
        )
    whole, _, fraction = amount.partition(".")
    if len(fraction) > decimals:
        raise InvalidRequest(
            f"amount has more than {decimals} fraction digits for this token",
            {"field": "amount", "decimals": decimals},
        )
    raw: int = int(whole) * 10**decimals + int((fraction or "0").ljust(decimals, "0"))
    if raw == 0:
        raise InvalidRequest("amount must be greater than zero", {"field": "amount"})
    if raw > MAX_RAW:
        raise InvalidRequest("amount is too large", {"field": "amount"})
    return raw


def to_decimal_string(raw: int, decimals: int) -> str:
    """``1500000`` with 6 decimals → ``"1.5"``; zero → ``"0"``. Never goes through floats."""
    whole, fraction = divmod(raw, 10**decimals)
    if fraction == 0:
        return str(whole)
    return f"{whole}.{str(fraction).rjust(decimals, '0').rstrip('0')}"


# What a payer is shown to send: the amount due rounded up to this many significant digits.
SHOWN_DIGITS = 6


def round_up_shown(raw: int, decimals: int, digits: int = SHOWN_DIGITS) -> int:
    """``raw`` rounded **up** to its first ``digits`` significant digits, and never to more
    than a whole unit: 0.006663333333333334 ETH → 0.00666334. Never less than what is due,
    and more by under one part in 10**(digits - 1)."""
    if raw <= 0:
        return raw
    unit: int = min(10 ** max(len(str(raw)) - digits, 0), 10**decimals)
    return -(-raw // unit) * unit
