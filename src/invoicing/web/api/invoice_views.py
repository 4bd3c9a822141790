"""The owner's representation of invoices for the API's answers (create, status, list):
the Invoice object with its ``payments`` of record, the escrow's ``refunds`` and
``otherBalances`` and when its shard was last read."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal
from invoicing.invoices.coverage import covered_by_passes, last_checked_of, shard_records
from invoicing.invoices.owner_view import other_balances_in, refunds_in
from invoicing.invoices.payments import payments_in
from invoicing.invoices.views import invoice_to_dict
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.tables.monitor import MonitorShard

# (payments, refunds, otherBalances) of one invoice; None: it has none.
ViewList = list[dict[str, Any]] | None
Extras = tuple[ViewList, ViewList, ViewList]
NO_EXTRAS: Extras = (None, None, None)


async def owner_views(
    services: Services,
    invoices: Sequence[Invoice | InvoiceRow],
    *,
    fresh: bool = False,
    checked_now: bool = False,
) -> list[dict[str, Any]]:
    """Owner representations, in the wire form of ``responses.Invoice`` (the routes write
    them as they are: ``Written``): the Invoice object plus its ``payments`` of record and
    the escrow's ``refunds`` and ``otherBalances`` (never shown on the public /pay routes).
    ``fresh``: just created, so there are none. ``lastCheckedAt`` comes from the shards'
    pass records (``invoices.coverage``) unless the invoices were just created or
    ``checked_now``.

    One invoice (create, status: the hot paths) shares its reads with the other requests
    in flight in this process, as the lookup before it does; a page reads its own."""
    page_url = services.settings.payment_page_url
    with_extras = [] if fresh else [invoice for invoice in invoices if invoice.has_extras]
    if not with_extras:
        extras: list[Extras] = [NO_EXTRAS] * len(invoices)
    elif len(invoices) == 1:
        extras = [await _EXTRAS.of(services.db).submit(invoices[0].id)]
    else:
        found = await _extras_batch(services.db, [invoice.id for invoice in with_extras])
        by_id = {invoice.id: extra for invoice, extra in zip(with_extras, found, strict=True)}
        extras = [by_id.get(invoice.id, NO_EXTRAS) for invoice in invoices]
    records: dict[tuple[int, int], MonitorShard] = {}
    if not (fresh or checked_now) and any(covered_by_passes(i) for i in invoices):
        async with services.db.reads() as session:
            records = await shard_records(session, invoices)
    x402 = services.chains.x402_tokens
    return [
        invoice_to_dict(
            invoice,
            page_url,
            payments=payments,
            refunds=refunds,
            other_balances=others,
            last_checked_at=last_checked_of(invoice, records),
            x402=x402,
        )
        for invoice, (payments, refunds, others) in zip(invoices, extras, strict=True)
    ]


# Concurrent reads of invoices' payments, refunds and other balances of this process share
# one query.
_EXTRAS: ProcessLocal[Coalescer[str, Extras]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_extras_batch, db), max_batch=500)
)


async def _extras_batch(db: Database, invoice_ids: Sequence[str]) -> list[Extras]:
    unique = list(dict.fromkeys(invoice_ids))
    async with db.reads() as session:  # independent reads: one snapshot is not needed
        payments = await payments_in(session, unique)
        refunds = await refunds_in(session, unique)
        others = await other_balances_in(session, unique)
    return [(payments.get(i), refunds.get(i), others.get(i)) for i in invoice_ids]
