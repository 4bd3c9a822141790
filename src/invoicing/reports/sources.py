"""Row sources of the payments report.

``PaidInvoices`` (``PAID_INVOICES``, the report's source today): one row per paid invoice,
keyed by the invoice's row id, in (``paid_at``, id) order. It knows no transfers, so
``txHash`` and ``from`` are empty, and ``amount`` is what the escrow was seen holding or
what its sweeps moved, whichever is larger. A source of payments of record (one row per
transfer into an escrow, with its hash and sender) replaces it by implementing
``payments.PaymentSource`` and being named in ``PAID_INVOICES``'s place; the fiat and fee
columns come from ``invoice_columns`` and ``sweeps.sweeps_of`` for it as they do here.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from invoicing.db import Database
from invoicing.invoices.amounts import to_decimal_string
from invoicing.reports.payments import Cursor, PaymentRow, ReportQuery
from invoicing.reports.sweeps import Swept, sweeps_of
from invoicing.tables.invoices import Invoice

NATIVE = "native"


class PaidInvoices:
    """One row per paid invoice (``payments.PaymentSource``)."""

    async def page(
        self, db: Database, query: ReportQuery, after: Cursor | None, limit: int
    ) -> list[PaymentRow]:
        statement = (
            select(Invoice)
            .where(
                Invoice.owner_key == query.owner_key,
                Invoice.paid_at.is_not(None),
                Invoice.paid_at >= query.date_from,
                Invoice.paid_at < query.date_to,
            )
            .order_by(Invoice.paid_at, Invoice.id)
            .limit(limit)
        )
        if query.currency is not None:
            statement = statement.where(Invoice.currency == query.currency)
        if after is not None:
            paid_at, key = after
            statement = statement.where(
                or_(Invoice.paid_at > paid_at, and_(Invoice.paid_at == paid_at, Invoice.id > key))
            )
        async with db.sessions() as session:
            invoices = list(await session.scalars(statement))
            swept = await sweeps_of(session, invoices)
        return [_row(invoice, swept.get(invoice.id)) for invoice in invoices]


PAID_INVOICES = PaidInvoices()


def _row(invoice: Invoice, swept: Swept | None) -> PaymentRow:
    assert invoice.paid_at is not None  # selected so
    received = max(int(invoice.balance_raw), int(invoice.swept_raw))
    currency, fiat_amount, rate = invoice_columns(invoice)
    return PaymentRow(
        invoiceId=invoice.invoice_id,
        paymentAddress=invoice.payment_address,
        chainId=invoice.chain_id,
        token=invoice.token_address or NATIVE,
        amount=to_decimal_string(received, invoice.decimals),
        paidAt=invoice.paid_at,
        txHash="",
        from_="",
        fiatCurrency=currency,
        fiatAmount=fiat_amount,
        rate=rate,
        fee="" if swept is None else to_decimal_string(swept.fee_raw, invoice.decimals),
        sweepTxHash="" if swept is None else swept.tx_hash,
        key=invoice.id,
    )


def invoice_columns(invoice: Invoice) -> tuple[str, str, str]:
    """(fiatCurrency, fiatAmount, rate): the price the invoice locked when it was priced in
    fiat (docs/integration/pricing.md), else empty."""
    if invoice.currency is None:
        return "", "", ""
    return invoice.currency, invoice.fiat_amount or "", invoice.rate or ""
