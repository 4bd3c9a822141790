"""Authorize, then capture (docs/integration/invoices.md#manual-capture).

An invoice created with ``capture: "manual"`` is paid as any other, but its funds wait in the
escrow (the withdrawals leave it alone: ``settlement.candidates``) until one of:

- a **capture** (``POST /integration/invoices/capture``, :func:`capture_invoice`): from then
  on it is swept as usual and becomes completed; a second capture answers as the first;
- a **void**: the owner's (or the owner's refund delegate's) signed Refund of the whole
  payment back to the payer (``refunds.void``); once confirmed the invoice is cancelled,
  ``voidedAt`` set, and its escrow never swept;
- the end of the owner's **capture window** (``capture_window_s`` after ``paidAt``, 7 days
  unless the owner chose otherwise): the settlement worker's full pass captures it
  (:func:`capture_expired`), or leaves it for a void when the owner chose so
  (``capture_at_window_end`` false).

Refusals (409): an invoice not paid (pending, expired, cancelled unpaid) ``invoice_not_paid``;
a capture of an automatic-capture invoice (captured when paid), or a void of a captured one,
``invoice_captured``; anything on a voided invoice or one whose void is in flight,
``invoice_voided``. Each capture takes the invoice's row lock, and a void's refund row is
written under the same lock (``refunds.void``): a capture and a void never both pass.

The voids in flight are read from the refunds table (``tables.refunds``).
"""

from __future__ import annotations

import logging

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.errors import (
    InvoiceCaptured,
    InvoiceNotPaid,
    InvoiceVoided,
    NotFound,
    ServiceError,
)
from invoicing.invoices.lifecycle import (
    Capture,
    InvoiceStatus,
    apply_step,
    awaits_capture,
    on_capture,
)
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.notifications.signing import DEFAULT_CAPTURE_WINDOW_S
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.tables.notifications import OwnerSettings
from invoicing.tables.refunds import Refund, pending_refund_ids, pending_void_ids

log = logging.getLogger(__name__)

# At most this many invoices are captured by one worker pass (the rest at the next).
MAX_CAPTURES_PER_PASS = 1_000


async def capture_invoice(
    services: Services, owner_key: str, chain_id: int, payment_address: str
) -> Invoice:
    """Capture a paid manual-capture invoice (``invoice.captured``); an invoice already
    captured is answered as it is, unchanged."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        invoice = await locked_invoice(session, owner_key, chain_id, payment_address)
        if invoice.capture == Capture.MANUAL and invoice.captured_at is not None:
            return invoice
        await refuse_unless_awaiting(session, invoice, "capture")
        events = apply_step(invoice, on_capture(invoice), now_ms)
        await record_events(session, services.settings, now_ms, [Occurrence(invoice, events)])
        return invoice


async def locked_invoice(
    session: AsyncSession, owner_key: str, chain_id: int, payment_address: str
) -> Invoice:
    """The owner's invoice at that escrow on that chain, under its row lock (404 otherwise)."""
    invoice = await session.scalar(
        select(Invoice)
        .where(
            Invoice.owner_key == owner_key,
            Invoice.chain_id == chain_id,
            Invoice.payment_address == payment_address,
        )
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if invoice is None:
        raise NotFound("no invoice with this paymentAddress for this owner on this chain")
    return invoice


def capture_refusal(invoice: Invoice | InvoiceRow, verb: str) -> ServiceError | None:
    """The 409 for a capture or void (``verb``) of an invoice that does not await its
    capture, None when it does (a void in flight is :func:`refuse_unless_awaiting`'s)."""
    if invoice.voided_at is not None:
        return InvoiceVoided(f"this invoice is voided: nothing to {verb}")
    if invoice.status in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED, InvoiceStatus.CANCELLED):
        return InvoiceNotPaid(
            f"this invoice is not paid: nothing to {verb}", {"status": invoice.status}
        )
    if not awaits_capture(invoice):
        return InvoiceCaptured(
            "this invoice's funds go to its owner (captured when paid, or already captured)"
            + ("" if verb == "capture" else ": refund the payer instead"),
            {"capture": invoice.capture, "status": invoice.status},
        )
    return None


async def refuse_unless_awaiting(
    session: AsyncSession, invoice: Invoice | InvoiceRow, verb: str
) -> None:
    """409 unless the invoice is paid, manual-capture, neither captured nor voided, and no
    void of it is in flight. ``verb``: what is asked (``capture`` or ``void``)."""
    refusal = capture_refusal(invoice, verb)
    if refusal is not None:
        raise refusal
    in_flight = await session.scalar(
        pending_void_ids().where(Refund.invoice_id == invoice.id).limit(1)
    )
    if in_flight is not None:
        raise InvoiceVoided(f"a void of this invoice is in flight: nothing to {verb}")


async def capture_expired(services: Services, chain_id: int, now_ms: int) -> int:
    """Capture the paid manual-capture invoices of ``chain_id`` whose owner's capture window
    is over, unless that owner leaves them for a void; returns how many. Those with a refund
    in flight wait for the next pass."""
    window_ms = func.coalesce(OwnerSettings.capture_window_s, DEFAULT_CAPTURE_WINDOW_S) * 1000
    due = (
        select(Invoice.id)
        .outerjoin(OwnerSettings, OwnerSettings.owner_key == Invoice.owner_key)
        .where(
            Invoice.chain_id == chain_id,
            Invoice.status == InvoiceStatus.PAID,
            Invoice.capture == Capture.MANUAL,
            Invoice.captured_at.is_(None),
            Invoice.voided_at.is_(None),
            Invoice.paid_at + window_ms <= now_ms,
            func.coalesce(OwnerSettings.capture_at_window_end, True).is_(True),
            Invoice.id.not_in(pending_refund_ids()),
        )
        .order_by(Invoice.id)
        .limit(MAX_CAPTURES_PER_PASS)
    )
    async with services.db.transaction() as session:
        invoices = list(
            await session.scalars(
                select(Invoice)
                .where(Invoice.id.in_(due))
                .order_by(Invoice.id)
                .with_for_update()
                .execution_options(populate_existing=True)
            )
        )
        occurrences = [
            Occurrence(invoice, apply_step(invoice, on_capture(invoice), now_ms))
            for invoice in invoices
            if awaits_capture(invoice)
        ]
        await record_events(session, services.settings, now_ms, occurrences)
    if occurrences:
        log.info("captured %d invoices at the end of their capture window", len(occurrences))
    return len(occurrences)
