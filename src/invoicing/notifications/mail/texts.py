"""A message's subject and body, in the languages of the payment page.

The English text is the source; every other language has a catalogue here,
``locales/<locale>.po`` (read once per process, as the payment page reads its own). The
languages are the payment page's (``web/page/i18n.py``; a test holds the two lists equal).
A message names the invoice's ``invoiceId`` in its subject and body; a subscription event's
names the subscription's ``id``.
"""

from __future__ import annotations

import io
from functools import cache
from importlib.resources import files
from typing import Any

from babel.messages.pofile import read_po

# Payment page language code → catalogue (Babel locale id); English is the source text.
LOCALES: dict[str, str | None] = {
    "en": None,
    "es": "es",
    "pt": "pt",
    "fr": "fr",
    "de": "de",
    "zh-Hans": "zh_Hans",
    "ja": "ja",
    "ar": "ar",
}
LANGUAGE_CODES = tuple(LOCALES)

# The subject of each event type mailed (the types of docs/architecture.md#events).
SUBJECTS: dict[str, str] = {
    "invoice.paid": "Invoice %(invoice_id)s was paid",
    "invoice.partially_paid": "Invoice %(invoice_id)s was partly paid",
    "invoice.overpaid": "Invoice %(invoice_id)s was overpaid",
    "invoice.late_paid": "Invoice %(invoice_id)s was paid after it expired",
    "invoice.expired": "Invoice %(invoice_id)s expired",
    "invoice.cancelled": "Invoice %(invoice_id)s was cancelled",
    "invoice.completed": "Invoice %(invoice_id)s was completed",
    "invoice.refunded": "Invoice %(invoice_id)s was refunded",
}
# The subject of each subscription event type mailed, and the lines of its body (a line
# whose value the event does not carry is left out).
SUBSCRIPTION_SUBJECTS: dict[str, str] = {
    "subscription.activated": "Subscription %(subscription_id)s is active",
    "subscription.charged": "Subscription %(subscription_id)s: period %(period)s was charged",
    "subscription.past_due": "Subscription %(subscription_id)s is past due",
    "subscription.cancelled": "Subscription %(subscription_id)s was cancelled",
    "subscription.finished": "Subscription %(subscription_id)s has finished",
}
SUBSCRIPTION_LINES = (
    ("subscription_id", "Subscription: %(subscription_id)s"),
    ("status", "Status: %(status)s"),
    ("period", "Period: %(period)s"),
    ("payer", "Payer: %(payer)s"),
    ("payment_address", "Payment address: %(payment_address)s"),
)
# A payer's receipt (``RECEIPT``), mailed when the invoice is paid.
RECEIPT = "receipt"
RECEIPT_SUBJECT = "Receipt: your payment for invoice %(invoice_id)s has arrived"
OTHER_SUBJECT = "Invoice %(invoice_id)s: %(event)s"
BODY_LINES = (
    "Invoice: %(invoice_id)s",
    "Status: %(status)s",
    "Amount: %(amount)s",
    "Chain: %(chain_id)s",
    "Payment address: %(payment_address)s",
    "Payment page: %(url)s",
)
FOOTER = (
    "You receive this message because these events are mailed to you in the settings of "
    "your invoicing account."
)
RECEIPT_FOOTER = "You receive this receipt because you asked for it on the payment page."
MESSAGE_IDS = tuple(
    dict.fromkeys(
        (
            *SUBJECTS.values(),
            OTHER_SUBJECT,
            *BODY_LINES,
            *SUBSCRIPTION_SUBJECTS.values(),
            *(line for _name, line in SUBSCRIPTION_LINES),
            FOOTER,
            RECEIPT_SUBJECT,
            RECEIPT_FOOTER,
        )
    )
)


@cache
def catalogue(language: str) -> dict[str, str]:
    """msgid → msgstr of ``language`` (empty for English: the ids are the text)."""
    locale = LOCALES.get(language)
    if locale is None:
        return {}
    text = files(__package__).joinpath("locales", f"{locale}.po").read_bytes()
    return {
        str(message.id): str(message.string)
        for message in read_po(io.BytesIO(text), locale=locale)
        if message.id and message.string
    }


def translate(language: str, message_id: str) -> str:
    return catalogue(language).get(message_id, message_id)


def subject_and_body(event_type: str, language: str, invoice: dict[str, Any]) -> tuple[str, str]:
    """The message telling of ``event_type`` (or a payer's ``RECEIPT``) for the owner's
    view ``invoice`` (only its fields named here are written)."""
    values = {
        "invoice_id": str(invoice.get("invoiceId", "")),
        "event": event_type,
        "status": str(invoice.get("status", "")),
        "amount": _amount(invoice),
        "chain_id": str(invoice.get("chainId", "")),
        "payment_address": str(invoice.get("paymentAddress", "")),
        "url": str(invoice.get("url", "")),
    }
    receipt = event_type == RECEIPT
    subject_id = RECEIPT_SUBJECT if receipt else SUBJECTS.get(event_type, OTHER_SUBJECT)
    subject = translate(language, subject_id) % values
    lines = [translate(language, line) % values for line in BODY_LINES]
    footer = translate(language, RECEIPT_FOOTER if receipt else FOOTER)
    body = "\n".join([*lines, "", footer, ""])
    return subject, body


def subscription_subject_and_body(
    event_type: str, language: str, subscription: dict[str, Any]
) -> tuple[str, str]:
    """The message telling of a subscription event, from the event's ``subscription``."""
    values = {
        "subscription_id": str(subscription.get("id", "")),
        "status": str(subscription.get("status", "")),
        "period": str(subscription.get("period", "")),
        "payer": str(subscription.get("payer", "")),
        "payment_address": str(subscription.get("paymentAddress", "")),
    }
    subject_id = SUBSCRIPTION_SUBJECTS.get(
        event_type, SUBSCRIPTION_SUBJECTS["subscription.activated"]
    )
    subject = translate(language, subject_id) % values
    lines = [
        translate(language, line) % values for name, line in SUBSCRIPTION_LINES if values[name]
    ]
    body = "\n".join([*lines, "", translate(language, FOOTER), ""])
    return subject, body


def _amount(invoice: dict[str, Any]) -> str:
    token = invoice.get("tokenAddress")
    return f"{invoice.get('amount', '')} {token or ''}".strip()
