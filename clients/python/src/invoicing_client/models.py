"""What the service returns, as typed models with snake_case attributes.

One rule for numbers, the same in the JavaScript SDK (docs/integration/sdks.md): an amount
in the token's units (``amount``, ``meta_balance``, ``remaining``) is a decimal string, never
a float; an amount in raw units (``*_raw``: wei, or the token's smallest unit) and a nonce
are integers (``int``; ``bigint`` in JavaScript), read from the service's decimal strings.
Timestamps are unix milliseconds. Fields added by newer service versions are ignored rather
than refused.

The models of the service's answers are generated from its ``openapi.json`` (``make sdk``
writes ``_generated/models.py``; edit the service's response models, not that file). This
module adds, by hand, what the document does not describe: ``CreatedInvoice`` (what the client
knows of its own create request) and ``WebhookEvent`` (the paid webhook's body).
"""

from __future__ import annotations

from invoicing_client._generated.models import *  # noqa: F403
from invoicing_client._generated.models import Invoice, Payment, _Model


class CreatedInvoice(Invoice):
    """An invoice as ``invoices.create`` returns it.

    ``created`` is False when the service already held this invoice (an identical earlier
    create of the same ``invoice_id``: a safe retry). In signature mode
    ``request_signature`` is the ``x-service-signature`` of the request that created it,
    which the paid webhook carries back; None in API-key mode, and when the invoice was
    created by an earlier call (then the webhook carries that call's signature)."""

    created: bool = True
    request_signature: str | None = None


class WebhookEvent(_Model):
    """The paid webhook's body (docs/integration/webhooks.md), once verified by
    ``webhooks.verify``.

    ``balance`` is the one JSON number of the body, kept as the service sent it; use
    ``balance_raw`` (an exact integer) for arithmetic. ``payments``: the transfers that paid
    the invoice, as its status lookup lists them (None when none was found)."""

    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str | None = None
    amount: str
    token_address: str | None
    status: str
    paid: bool
    paid_at: int
    required_raw: int
    balance_raw: int
    balance: float | int | str
    updated_at: int
    payments: list[Payment] | None = None
    # Set from the headers: stable across retries of one event, for de-duplication.
    event_id: str | None = None
