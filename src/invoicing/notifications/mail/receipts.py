"""Payers' receipts: a payer gives an address on the payment page of a pending invoice
whose owner sends receipts; when the invoice is paid, the receipt is queued with the
``invoice.paid`` event (``queue``). One address per invoice (a later one replaces it).

A receipt carries only what the payment page shows (``RECEIPT_FIELDS``): never the
owner's metadata, description or webhook settings.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import upsert
from invoicing.errors import Forbidden
from invoicing.notifications.mail.choices import checked_email
from invoicing.notifications.mail.texts import LANGUAGE_CODES
from invoicing.tables.mail import OwnerMail, ReceiptRequest

RECEIPT_FIELDS = (
    "invoiceId",
    "status",
    "amount",
    "tokenAddress",
    "chainId",
    "paymentAddress",
    "url",
)


async def receipts_offered(session: AsyncSession, owner_key: str) -> bool:
    """Whether the owner lets payers ask for receipts."""
    return bool(
        await session.scalar(select(OwnerMail.receipts).where(OwnerMail.owner_key == owner_key))
    )


async def request_receipt(
    session: AsyncSession, invoice_pk: str, owner_key: str, email: str, language: str, now_ms: int
) -> None:
    """Keep the payer's address for the invoice's receipt (403 when the owner sends none)."""
    address = checked_email(email)
    if language not in LANGUAGE_CODES:
        language = "en"
    if not await receipts_offered(session, owner_key):
        raise Forbidden("this shop does not send receipts")
    row = {
        "invoice_pk": invoice_pk,
        "owner_key": owner_key,
        "email": address,
        "language": language,
        "created_at": now_ms,
    }
    dialect = (await session.connection()).dialect.name
    await session.execute(
        upsert(dialect, ReceiptRequest)
        .values(row)
        .on_conflict_do_update(
            index_elements=["invoice_pk"],
            set_={"email": address, "language": language, "created_at": now_ms},
        )
    )


async def receipt_requests(
    session: AsyncSession, invoice_pks: Sequence[str]
) -> dict[str, ReceiptRequest]:
    if not invoice_pks:
        return {}
    rows = await session.scalars(
        select(ReceiptRequest).where(ReceiptRequest.invoice_pk.in_(invoice_pks))
    )
    return {row.invoice_pk: row for row in rows}
