"""``InvoiceRow``, the create path's shape of an invoice: the table's columns, in order."""

from __future__ import annotations

from dataclasses import fields
from typing import cast

from sqlalchemy import Table, inspect

from invoicing.tables.invoices import INVOICE_COLUMN_NAMES, Invoice, InvoiceRow

TABLE = cast(Table, Invoice.__table__)


def test_fields_are_the_invoice_attributes_in_table_column_order() -> None:
    attributes = inspect(Invoice).column_attrs

    assert [field.name for field in fields(InvoiceRow)] == [attr.key for attr in attributes]
    assert [attr.columns[0] for attr in attributes] == list(TABLE.columns)
    assert INVOICE_COLUMN_NAMES == tuple(column.key for column in TABLE.columns)


def test_a_copy_of_an_orm_row_and_its_column_values() -> None:
    values = {attr.key: f"value {i}" for i, attr in enumerate(inspect(Invoice).column_attrs)}
    orm = Invoice(**values)

    copied = InvoiceRow.copy_of(orm)

    assert copied == InvoiceRow(**values)
    assert copied.values() == tuple(values.values())
    assert copied.column_values()["metadata"] == values["metadata_"]
    assert list(copied.column_values()) == list(INVOICE_COLUMN_NAMES)
