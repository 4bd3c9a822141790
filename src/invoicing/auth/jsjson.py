"""JSON text exactly as JavaScript's ``JSON.stringify`` writes it (no whitespace).

Signature mode signs ``JSON.stringify`` output (docs/integration/authentication.md).
Python's ``json.dumps`` with ``separators=(",", ":")`` and ``ensure_ascii=False`` writes the
same text for strings, booleans, null, integers up to 2^53 and most decimals, but not for
every number:
``1e-07`` / ``1e-7``, ``1e+16`` / ``10000000000000000``, ``1.0`` / ``1``. This module writes
numbers with ECMAScript's Number::toString (ECMA-262 section 6.1.6.1.20): the shortest
digits that round-trip (what Python's ``repr`` finds too), in positional notation for
decimal exponents from -6 to 20 and ``d.ddde±n`` outside. Integers above 2^53 become the
double a JavaScript client would hold. Lone surrogates are escaped as ``\\udxxx`` (the
well-formed ``JSON.stringify`` of ES2019).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

_SAFE_INTEGER = 2**53


def stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for a value ``json.loads`` returned (dicts keep key order)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value) if -_SAFE_INTEGER <= value <= _SAFE_INTEGER else _big_integer(value)
    if isinstance(value, float):
        return number_to_string(value)
    if isinstance(value, dict):
        members = (_string(str(key)) + ":" + stringify(item) for key, item in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(stringify(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if any("\ud800" <= char <= "\udfff" for char in value):
        text = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _big_integer(value: int) -> str:
    try:
        return number_to_string(float(value))
    except OverflowError:  # JavaScript reads it as Infinity, which JSON.stringify writes null
        return "null"


def number_to_string(value: float) -> str:
    """ECMAScript Number::toString(value) in radix 10; non-finite numbers as ``null``."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    if value < 0:
        return "-" + number_to_string(-value)
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int) and sign == 0
    digits = "".join(str(d) for d in digit_tuple)
    k = len(digits)
    n = exponent + k  # value = 0.digits × 10^n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
