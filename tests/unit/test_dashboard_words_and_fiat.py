"""What the back office shows a merchant, from its pure parts: fiat values (the locked price,
else the amount at the rate at payment, rounded half up to the currency's minor units), the
amount a payer is asked to send (rounded up, never under what is due: a hypothesis
property), the chart's scale, plain words for codes, and the hint of an operator command
run without its configuration."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from invoicing.cli.common import load_settings
from invoicing.invoices.amounts import round_up_shown, to_decimal_string
from invoicing.invoices.fiat import round_fiat, shown_value, value_in
from invoicing.tables.rates import PaidRate
from invoicing.web.dashboard.chart import nice_top
from invoicing.web.dashboard.words import count_words, event_words, status_words


@dataclass
class Row:
    required_raw: str
    decimals: int
    currency: str | None = None
    fiat_amount: str | None = None


ETH_005 = Row(str(5 * 10**16), 18)
PRICED = Row("6663333333333334", 18, "USD", "19.99")


def test_the_locked_price_is_the_value_in_its_currency() -> None:
    value = value_in(PRICED, None, "USD")
    assert value is not None and (value.text(), value.locked) == ("19.99 USD", True)
    # Another reporting currency: only a rate recorded at payment gives a value.
    assert value_in(PRICED, None, "EUR") is None
    eur = value_in(PRICED, PaidRate(currency="EUR", rate="2750.5"), "EUR")
    assert eur is not None and eur.text() == "18.33 EUR"  # 0.006663333… × 2750.5 = 18.3275…
    shown = shown_value(PRICED, PaidRate(currency="EUR", rate="2750.5"), "EUR")
    assert shown is not None and shown.text() == "19.99 USD"  # a row shows its own price


def test_the_rate_at_payment_values_an_unpriced_invoice() -> None:
    value = value_in(ETH_005, PaidRate(currency="USD", rate="3000.12345678"), "USD")
    assert value is not None and (value.text(), value.locked) == ("150.01 USD", False)
    assert value_in(ETH_005, PaidRate(currency="USD", rate=None), "USD") is None
    assert value_in(ETH_005, PaidRate(currency="USD", rate="3000"), None) is None
    jpy = value_in(ETH_005, PaidRate(currency="JPY", rate="450000.5"), "JPY")
    assert jpy is not None and jpy.text() == "22500 JPY"  # 22500.025 → no minor units


def test_fiat_rounds_half_up_to_minor_units() -> None:
    assert round_fiat(Fraction(19995, 1000), "USD") == Decimal("20.00")
    assert round_fiat(Fraction(19994999, 1000000), "USD") == Decimal("19.99")
    assert round_fiat(Fraction(15004, 10), "JPY") == Decimal("1500")
    assert round_fiat(Fraction(1, 2000), "BHD") == Decimal("0.001")


def test_the_amount_to_send_is_shown_with_six_significant_digits() -> None:
    due = 6663333333333334  # 0.006663333333333334 ETH, a $19.99 order
    assert to_decimal_string(round_up_shown(due, 18), 18) == "0.00666334"
    assert round_up_shown(19_990_000, 6) == 19_990_000  # 19.99 TUSD stays exact
    # Never coarser than a whole unit: 123456789.000001 → 123456790.
    assert round_up_shown(123_456_789_000_001, 6) == 123_456_790_000_000
    assert round_up_shown(0, 18) == 0


@given(st.integers(min_value=1, max_value=2**256 - 1), st.integers(min_value=0, max_value=36))
def test_the_amount_to_send_is_never_under_what_is_due(due: int, decimals: int) -> None:
    shown = round_up_shown(due, decimals)
    assert shown >= due
    # Close: over by less than one part in 100,000 (six significant digits).
    assert (shown - due) * 100_000 < due


def test_the_chart_scale_ends_on_a_round_number() -> None:
    assert nice_top(Decimal("51.5")) == Decimal(80)  # ticks 0, 20, 40, 60, 80
    assert nice_top(Decimal("0.05")) == Decimal("0.08")
    assert nice_top(Decimal(0)) == Decimal(4)
    assert nice_top(Decimal("170.00")) == Decimal(200)


def test_codes_read_as_words() -> None:
    assert event_words("invoice.partially_paid") == "Partly paid"
    assert event_words("invoice.late_paid") == "Paid after it expired"
    assert event_words("endpoint.test") == "endpoint.test"
    assert status_words("pending", "1") == "partly paid"
    assert status_words("pending", "0") == "awaiting payment"
    assert status_words("paid", "5") == "paid"
    assert count_words(1, "invoice matches", "invoices match") == "1 invoice matches"
    assert count_words(0, "invoice matches", "invoices match") == "0 invoices match"
    assert count_words(1234, "invoice matches", "invoices match") == "1,234 invoices match"


def test_a_command_without_configuration_says_how_to_give_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INVOICING_ENVIRONMENT", "production")
    monkeypatch.delenv("INVOICING_SECRET", raising=False)
    with pytest.raises(typer.Exit):
        load_settings(None)
    err = capsys.readouterr().err
    assert "INVOICING_SECRET" in err
    hint = "for a service started by `invoicing dev`, pass the env file its ready line names"
    assert f'{hint}: --env-file "<env_file>"' in err
