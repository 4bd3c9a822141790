from __future__ import annotations

import pytest

from invoicing.errors import InvalidRequest
from invoicing.invoices.amounts import to_decimal_string, to_raw


@pytest.mark.parametrize(
    ("amount", "decimals", "raw"),
    [
        ("1.5", 18, 1_500_000_000_000_000_000),
        ("1", 6, 1_000_000),
        ("0.000001", 6, 1),
        ("007.10", 6, 7_100_000),
        ("123456789012345678901234567890", 0, 123456789012345678901234567890),
    ],
)
def test_to_raw_is_exact(amount: str, decimals: int, raw: int) -> None:
    assert to_raw(amount, decimals) == raw


@pytest.mark.parametrize(
    "amount", ["0", "0.0", "-1", "+1", "1e3", "1.", ".1", " 1", "1,5", "", "0.0000001", "١"]
)
def test_to_raw_refuses(amount: str) -> None:
    with pytest.raises(InvalidRequest):
        to_raw(amount, 6)


def test_to_raw_refuses_more_than_uint256() -> None:
    with pytest.raises(InvalidRequest):
        to_raw(str(2**256), 0)


@pytest.mark.parametrize(
    ("raw", "decimals", "text"),
    [
        (0, 18, "0"),
        (1_500_000, 6, "1.5"),
        (1, 18, "0.000000000000000001"),
        (10**18, 18, "1"),
        (25_000_001, 6, "25.000001"),
    ],
)
def test_to_decimal_string(raw: int, decimals: int, text: str) -> None:
    assert to_decimal_string(raw, decimals) == text
