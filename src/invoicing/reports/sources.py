"""Row sources of the payments report.

``PaymentsOfRecord`` (``PAYMENTS_OF_RECORD``, the report's source): one row per payment of
record (``invoices.payments``: a transfer into an invoice's escrow, a late or extra one
included), keyed by (invoice row id, transaction hash, source), in (block time, key) order.
``paidAt`` is the time of the transfer's block (for records made before block times were
kept, when the monitor recorded it); ``amount`` is the transfer's, in the token's units.

The fiat columns value each payment at its invoice's rate: the rate the invoice locked when
it was priced in fiat (docs/integration/pricing.md), else the rate at payment in the owner's
reporting currency (``invoices.fiat``); ``fiatAmount`` is the payment's amount at that rate,
rounded half up to the currency's minor units. The fee and sweep are the invoice's
(``sweeps.sweeps_of``), on each of its rows.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from sqlalchemy import Select, select, tuple_

from invoicing.db import Database
from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.fiat import round_fiat
from invoicing.reports.payments import Cursor, PaymentRow, ReportQuery
from invoicing.reports.sweeps import Swept, sweeps_of
from invoicing.tables.invoices import Invoice
from invoicing.tables.rates import PaidRate
from invoicing.tables.records import PaymentRecord

NATIVE = "native"
# A row's key: its record's primary key, joined by a character none of its parts holds.
KEY_SEPARATOR = " "

# A record's paid time; the report's window and order read its index
# (``ix_payment_records_block_time``).
_PAID_AT = PaymentRecord.block_time


class PaymentsOfRecord:
    """One row per payment of record (``payments.PaymentSource``)."""

    async def page(
        self, db: Database, query: ReportQuery, after: Cursor | None, limit: int
    ) -> list[PaymentRow]:
        statement = page_statement(query, after, limit)
        if statement is None:
            return []
        async with db.sessions() as session:
            found = list(await session.execute(statement))
            invoices = list({invoice.id: invoice for _, invoice, _ in found}.values())
            swept = await sweeps_of(session, invoices)
            rates = {
                row.invoice_pk: row
                for row in await session.scalars(
                    select(PaidRate).where(PaidRate.invoice_pk.in_([i.id for i in invoices]))
                )
            }
        return [
            _row(record, invoice, int(paid_at), swept.get(invoice.id), rates.get(invoice.id))
            for record, invoice, paid_at in found
        ]


PAYMENTS_OF_RECORD = PaymentsOfRecord()


def page_statement(
    query: ReportQuery, after: Cursor | None, limit: int
) -> Select[PaymentRecord, Invoice, int] | None:
    """The records of a page: ``limit`` of ``query``'s window after ``after``, in order
    (None: a cursor that names no record)."""
    order = (_PAID_AT, PaymentRecord.invoice_id, PaymentRecord.tx_hash, PaymentRecord.source)
    statement = (
        select(PaymentRecord, Invoice, _PAID_AT)
        .join(Invoice, Invoice.id == PaymentRecord.invoice_id)
        .where(
            Invoice.owner_key == query.owner_key,
            _PAID_AT >= query.date_from,
            _PAID_AT < query.date_to,
        )
        .order_by(*order)
        .limit(limit)
    )
    if query.currency is not None:
        statement = statement.where(Invoice.currency == query.currency)
    if after is not None:
        key = split_key(after[1])
        if key is None:
            return None
        statement = statement.where(tuple_(*order) > tuple_(after[0], *key))
    return statement


def split_key(key: str) -> tuple[str, str, str] | None:
    """A row key's (invoice row id, transaction hash, source); None for one not ours."""
    parts = key.split(KEY_SEPARATOR)
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def _row(
    record: PaymentRecord,
    invoice: Invoice,
    paid_at: int,
    swept: Swept | None,
    paid: PaidRate | None,
) -> PaymentRow:
    currency, rate = invoice_rate(invoice, paid)
    fiat_amount = ""
    if rate:
        exact = Fraction(int(record.amount_raw), 10**invoice.decimals) * Fraction(Decimal(rate))
        fiat_amount = str(round_fiat(exact, currency))
    return PaymentRow(
        invoiceId=invoice.invoice_id,
        paymentAddress=invoice.payment_address,
        chainId=invoice.chain_id,
        token=record.token_address or NATIVE,
        amount=to_decimal_string(int(record.amount_raw), invoice.decimals),
        paidAt=paid_at,
        txHash=record.tx_hash,
        from_=record.from_address,
        fiatCurrency=currency if rate else "",
        fiatAmount=fiat_amount,
        rate=rate,
        fee="" if swept is None else to_decimal_string(swept.fee_raw, invoice.decimals),
        sweepTxHash="" if swept is None else swept.tx_hash,
        key=KEY_SEPARATOR.join((record.invoice_id, record.tx_hash, record.source)),
    )


def invoice_rate(invoice: Invoice, paid: PaidRate | None) -> tuple[str, str]:
    """(currency, rate: its units per whole unit of the asset) the invoice's payments are
    valued at: the rate it locked when priced in fiat, else its rate at payment in the
    owner's reporting currency; ("", "") when it has neither."""
    if invoice.currency is not None and invoice.rate:
        return invoice.currency, invoice.rate
    if paid is not None and paid.rate is not None:
        return paid.currency, paid.rate
    return "", ""
