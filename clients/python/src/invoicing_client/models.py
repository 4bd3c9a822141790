"""What the service returns, as typed models with snake_case attributes.

Amounts keep the service's units: ``amount`` and ``meta_balance`` are decimal strings in the
token's units (never floats); ``required_raw`` and ``balance_raw`` are integers in raw units
(wei, or the token's smallest unit). Timestamps are unix milliseconds. Fields added by newer
service versions are ignored rather than refused.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class Invoice(_Model):
    """The Invoice object (spec 2.1) as the owner sees it."""

    id: str
    owner_address: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str | None = None
    amount: str
    token_address: str | None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    expires_at: int
    status: str
    paid: bool
    paid_at: int | None
    withdrawn: bool
    withdrawn_at: int | None
    required_raw: int
    balance_raw: int
    meta_balance: str
    last_checked_at: int | None = None
    created_at: int
    updated_at: int
    url: str
    refunds: list[dict[str, Any]] | None = None
    other_balances: list[dict[str, Any]] | None = None


class CreatedInvoice(Invoice):
    """An invoice as ``invoices.create`` returns it.

    ``created`` is False when the service already held this invoice (an identical earlier
    create of the same ``invoice_id``: a safe retry). In signature mode
    ``request_signature`` is the ``x-service-signature`` of the request that created it,
    which the paid webhook carries back; None in API-key mode, and when the invoice was
    created by an earlier call (then the webhook carries that call's signature)."""

    created: bool = True
    request_signature: str | None = None


class DeletedInvoice(_Model):
    deleted: bool
    invoice_id: str
    chain_id: int


class FeeSettings(_Model):
    """An owner's settings as the factory holds them (``nonce`` is the next one to sign)."""

    fee_bps: int
    payout_address: str | None
    nonce: int
    factory: str | None = None


class FeeSubmission(_Model):
    """A relayed SetFee/SetPayout: the transaction carrying it (202 from the service)."""

    tx_hash: str
    chain_id: int
    owner_address: str
    nonce: int
    status: str


class ApiKey(_Model):
    """An API key as listed (never with its secret)."""

    id: str
    label: str | None
    created_at: int
    revoked_at: int | None = None


class IssuedApiKey(_Model):
    """A new API key; ``api_key`` is shown this once and cannot be read again."""

    id: str
    api_key: str
    label: str | None
    created_at: int


class RevokedApiKey(_Model):
    revoked: bool
    id: str
    revoked_at: int


class WebhookEvent(_Model):
    """The paid webhook's body (spec 2.2), once verified by ``webhooks.verify``.

    ``balance`` is the one JSON number of the spec, kept as the service sent it; use
    ``balance_raw`` (an exact integer) for arithmetic."""

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
    # Set from the headers: stable across retries of one event, for de-duplication.
    event_id: str | None = None
