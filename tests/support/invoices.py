"""The invoice routes' path, and an owner's invoices counted in the database."""

from __future__ import annotations

from sqlalchemy import func, select

from invoicing.tables.invoices import Invoice
from tests.conftest import RunningApp

PATH = "/integration/invoices"


async def count_invoices(app: RunningApp, owner_address: str) -> int:
    async with app.services.db.sessions() as session:
        total = await session.scalar(
            select(func.count())
            .select_from(Invoice)
            .where(Invoice.owner_key == owner_address.lower())
        )
    return int(total or 0)
