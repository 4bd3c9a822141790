"""What an invoice is worth in fiat, for the owner's reports (docs/dashboard.md).

An owner may choose a reporting currency (``owner_settings.reporting_currency``, ISO 4217).
An invoice's value in it is, in this order:

- its **locked price**, when it was priced in that currency at creation
  (``invoices.currency`` and ``fiat_amount``: docs/integration/pricing.md);
- else its amount at the **rate at payment**: once an invoice of an owner with a reporting
  currency is paid, the monitor records the asset's rate in that currency from the sources
  a quote uses (``pricing.quotes.asset_rate``: a peg, else the chain's price feed) in
  ``invoice_paid_rates``. An asset with neither is recorded without a rate, so it is not
  asked again; a feed that cannot be used now is asked again at the next pass, for a day.

Values are exact rationals rounded half up to the currency's minor units; a total is the
sum of the rounded values its rows show. The rate is recorded once, in the currency chosen
at payment: an invoice paid before a change of currency has no value in the new one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from sqlalchemy import exists, or_, select

from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database, upsert
from invoicing.errors import ChainUnavailable, PriceUnavailable, UnpricedCurrency
from invoicing.pricing.currencies import minor_units
from invoicing.pricing.quotes import asset_rate
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import OwnerSettings
from invoicing.tables.rates import PaidRate

# Paid invoices are given their rate for this long after payment (a feed out for longer
# leaves them without a value rather than with a stale one).
RATE_WINDOW_MS = 86_400_000
RATE_BATCH = 500


class Priced(Protocol):
    """What a value is computed from: an ``Invoice`` or a Core row with these columns."""

    @property
    def required_raw(self) -> str: ...

    @property
    def decimals(self) -> int: ...

    @property
    def currency(self) -> str | None: ...

    @property
    def fiat_amount(self) -> str | None: ...


@dataclass(frozen=True)
class FiatValue:
    amount: Decimal  # rounded to the currency's minor units
    currency: str
    locked: bool  # the invoice's own price (else its amount at the rate at payment)

    def text(self) -> str:
        return f"{self.amount} {self.currency}"


def round_fiat(value: Fraction, currency: str) -> Decimal:
    """A non-negative ``value`` of ``currency`` rounded half up to its minor units
    (19.995 USD → 20.00, 1500.4 JPY → 1500)."""
    digits = minor_units(currency)
    scaled = value * 10**digits
    whole = (2 * scaled.numerator + scaled.denominator) // (2 * scaled.denominator)
    return Decimal(whole).scaleb(-digits)


def at_rate(invoice: Priced, rate: str, currency: str) -> Decimal:
    """The invoice's amount (``required_raw``) at ``rate`` units of ``currency`` per whole
    unit of its asset, rounded to the currency's minor units."""
    exact = Fraction(int(invoice.required_raw), 10**invoice.decimals) * Fraction(Decimal(rate))
    return round_fiat(exact, currency)


def value_in(invoice: Priced, paid: PaidRate | None, currency: str | None) -> FiatValue | None:
    """The invoice's value in ``currency``: its locked price, else at its rate at payment
    (None: no value in that currency, or no currency chosen)."""
    if currency is None:
        return None
    if invoice.currency == currency and invoice.fiat_amount is not None:
        return FiatValue(Decimal(invoice.fiat_amount), currency, locked=True)
    if paid is not None and paid.currency == currency and paid.rate is not None:
        return FiatValue(at_rate(invoice, paid.rate, currency), currency, locked=False)
    return None


def shown_value(invoice: Priced, paid: PaidRate | None, currency: str | None) -> FiatValue | None:
    """What a row shows beside the token amount: the locked price in whichever currency the
    invoice was priced in, else its value in the reporting currency."""
    if invoice.currency is not None and invoice.fiat_amount is not None:
        return FiatValue(Decimal(invoice.fiat_amount), invoice.currency, locked=True)
    return value_in(invoice, paid, currency)


async def paid_rates_of(db: Database, invoice_pks: Collection[str]) -> dict[str, PaidRate]:
    """The recorded rates of these invoices, by invoice id."""
    if not invoice_pks:
        return {}
    async with db.sessions() as session:
        rows = await session.scalars(
            select(PaidRate).where(PaidRate.invoice_pk.in_(list(invoice_pks)))
        )
        return {row.invoice_pk: row for row in rows}


async def record_paid_rates(db: Database, chain: ChainGateway, now_ms: int) -> int:
    """Record the rate at payment of the chain's invoices paid in the last day whose owner
    has a reporting currency they were not priced in; returns how many were recorded. One
    read per asset and currency (a peg costs none); at rest one indexed query."""
    recorded = exists(select(PaidRate.invoice_pk).where(PaidRate.invoice_pk == Invoice.id))
    statement = (
        select(Invoice.id, Invoice.token_address, OwnerSettings.reporting_currency)
        .join(OwnerSettings, OwnerSettings.owner_key == Invoice.owner_key)
        .where(
            Invoice.chain_id == chain.config.chain_id,
            Invoice.paid_at >= now_ms - RATE_WINDOW_MS,
            OwnerSettings.reporting_currency.is_not(None),
            or_(Invoice.currency.is_(None), Invoice.currency != OwnerSettings.reporting_currency),
            ~recorded,
        )
        .limit(RATE_BATCH)
    )
    async with db.sessions() as session:
        due = (await session.execute(statement)).all()
    rates: dict[tuple[str | None, str], tuple[str | None, str | None] | None] = {}
    for _pk, token, currency in due:
        key = (token, str(currency))  # the query takes owners with a reporting currency only
        if key not in rates:
            rates[key] = await _rate_or_none(chain, token, key[1], now_ms)
    rows = [
        {
            "invoice_pk": pk,
            "currency": currency,
            "rate": found[0],
            "source": found[1],
            "recorded_at": now_ms,
        }
        for pk, token, currency in due
        if (found := rates[(token, str(currency))]) is not None
    ]
    if rows:
        async with db.transaction() as session:
            insert = upsert(db.engine.dialect.name, PaidRate).on_conflict_do_nothing()
            await session.execute(insert, rows)
    return len(rows)


async def _rate_or_none(
    chain: ChainGateway, token: str | None, currency: str, now_ms: int
) -> tuple[str | None, str | None] | None:
    """(rate, source); (None, None) when the asset has no price in ``currency``; None when
    its feed cannot be read or used now (asked again at the next pass)."""
    try:
        found = await asset_rate(chain, token, currency, now_ms)
    except UnpricedCurrency:
        return (None, None)
    except (PriceUnavailable, ChainUnavailable):
        return None
    return (found.rate, found.source)
