"""What a refund the service signs asks for (``refunds.delegated.raw_amount``): a share of a
fiat price refunds that share of the raw amount it locked, rounded down; any amount string a
shop sends is either a raw amount within the price or a 400 naming the field."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.errors import InvalidRequest
from invoicing.refunds.delegated import ServiceRefund, raw_amount
from invoicing.tables.invoices import InvoiceRow

OWNER = "0x0000000000000000000000000000000000000001"
ESCROW = "0x0000000000000000000000000000000000000002"


def invoice(required_raw: int, currency: str | None, price: str | None, decimals: int = 18) -> Any:
    fields = {"required_raw": str(required_raw), "currency": currency, "fiat_amount": price,
              "decimals": decimals}  # fmt: skip
    return cast(InvoiceRow, SimpleNamespace(**fields))


def asked(amount: str | None = None, amount_raw: int | None = None) -> ServiceRefund:
    return ServiceRefund(OWNER, 31337, ESCROW, amount_raw, amount)


def test_a_share_of_a_fiat_price_is_that_share_of_what_it_locked_rounded_down() -> None:
    # 30.00 USD locked 0.01 ETH: 10.00 USD is a third of it, rounded down.
    thirty = invoice(10**16, "USD", "30.00")
    assert raw_amount(thirty, asked("10")) == 3333333333333333
    assert raw_amount(thirty, asked("10.00")) == 3333333333333333
    assert raw_amount(thirty, asked("30")) == 10**16
    assert raw_amount(thirty, asked("0.015")) == 5 * 10**12
    assert raw_amount(thirty, asked(amount_raw=7)) == 7


def test_a_token_price_takes_the_amount_in_the_token() -> None:
    assert raw_amount(invoice(10**16, None, None), asked("0.004")) == 4 * 10**15
    assert raw_amount(invoice(25 * 10**5, None, None, 6), asked("1.5")) == 1_500_000


@pytest.mark.parametrize(
    ("amount", "amount_raw"),
    [(None, None), ("1", 1), ("30.01", None), ("-1", None), ("1e2", None), ("0", None),
     ("0.00", None), (" 1", None), ("1.", None), (".5", None), ("1" * 41, None),
     ("0.000000000000000000000001", None)],
)  # fmt: skip
def test_bad_amounts_are_refused_with_the_field(amount: str | None, amount_raw: int | None) -> None:
    with pytest.raises(InvalidRequest) as refused:
        raw_amount(invoice(10**16, "USD", "30.00"), asked(amount, amount_raw))
    assert refused.value.details["field"] == "amount"


@given(st.text(max_size=50))
def test_any_amount_string_is_a_raw_amount_within_the_price_or_a_400(text: str) -> None:
    locked = 10**16
    try:
        raw = raw_amount(invoice(locked, "EUR", "12.34"), asked(text))
    except InvalidRequest as exc:
        assert exc.details["field"] == "amount"
        return
    assert 0 < raw <= locked
    assert raw == int(locked * Decimal(text) / Decimal("12.34"))
