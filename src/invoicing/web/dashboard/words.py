"""The dashboard's words for what the service stores as codes: event types and statuses in
plain English, and counts with their plural."""

from __future__ import annotations

from invoicing.invoices.lifecycle import InvoiceEvent, InvoiceStatus

EVENT_WORDS = {
    InvoiceEvent.PAID: "Paid",
    InvoiceEvent.PARTIALLY_PAID: "Partly paid",
    InvoiceEvent.OVERPAID: "Paid more than the amount",
    InvoiceEvent.LATE_PAID: "Paid after it expired",
    InvoiceEvent.EXPIRED: "Expired",
    InvoiceEvent.CANCELLED: "Cancelled",
    InvoiceEvent.COMPLETED: "Completed (swept to you)",
    InvoiceEvent.REFUNDED: "Refunded",
    InvoiceEvent.PAYMENT_RECORDED: "Payment recorded",
    InvoiceEvent.CAPTURED: "Captured",
    InvoiceEvent.VOIDED: "Voided (paid back)",
}
STATUS_WORDS: dict[str, str] = {
    InvoiceStatus.PENDING: "awaiting payment",
    InvoiceStatus.PAID: "paid",
    InvoiceStatus.COMPLETED: "completed",
    InvoiceStatus.CANCELLED: "cancelled",
    InvoiceStatus.EXPIRED: "expired",
}
PARTLY_PAID = "partly paid"


def event_words(event_type: str) -> str:
    """``invoice.partially_paid`` → "Partly paid"; an unknown type as it is."""
    try:
        return EVENT_WORDS[InvoiceEvent(event_type)]
    except ValueError:
        return event_type


def status_words(status: str, balance_raw: str | int = 0) -> str:
    """An invoice's status for a reader: a pending invoice that received part of its amount
    is "partly paid"."""
    if status == InvoiceStatus.PENDING and int(balance_raw) > 0:
        return PARTLY_PAID
    return STATUS_WORDS.get(status, status)


def count_words(count: int, one: str, many: str) -> str:
    """``1, "invoice matches", "invoices match"`` → "1 invoice matches"; thousands grouped."""
    return f"{count:,} {one if count == 1 else many}"
