"""The Invoice object and the paid webhook's payload (docs/reference/api.md)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from invoicing.invoices.amounts import to_decimal_string
from invoicing.invoices.lifecycle import least_paid_raw
from invoicing.tables.invoices import Invoice, InvoiceRow


def payment_url(payment_page_url: str, payment_address: str) -> str:
    return f"{payment_page_url.rstrip('/')}/pay/{payment_address}"


def invoice_to_dict(
    invoice: Invoice | InvoiceRow,
    payment_page_url: str,
    *,
    payments: list[dict[str, Any]] | None = None,
    refunds: list[dict[str, Any]] | None = None,
    other_balances: list[dict[str, Any]] | None = None,
    last_checked_at: int | None = None,
    x402: frozenset[tuple[int, str]] = frozenset(),
) -> dict[str, Any]:
    """The Invoice object (docs/reference/api.md; a loaded row, or one just created or re-checked).
    The owner's view passes the invoice's ``payments`` of record, ``refunds`` and
    ``other_balances``: other assets found in the escrow and not swept yet
    (``invoices.owner_view``); each key is present
    only when there are some. ``last_checked_at``: the invoice's ``lastCheckedAt`` from its
    shard's passes (``invoices.coverage``); default the row's own. ``x402``: the tokens with
    EIP-3009 (``x402_tokens``): an invoice in one carries ``x402Url``, its x402 resource."""
    body: dict[str, Any] = {
        "id": invoice.id,
        "ownerAddress": invoice.owner_address,
        "chainId": invoice.chain_id,
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        # The escrow's CREATE2 salt: with it the owner can sweep the escrow without us.
        "salt": invoice.salt,
        "amount": invoice.amount,
        "tokenAddress": invoice.token_address,
    }
    if invoice.description is not None:
        body["description"] = invoice.description
    if invoice.metadata_ is not None:
        body["metadata"] = invoice.metadata_
    body.update(subscription_field(invoice))
    if invoice.redirect_url is not None:
        body["redirectUrl"] = invoice.redirect_url
    if invoice.cancel_url is not None:
        body["cancelUrl"] = invoice.cancel_url
    body.update(
        {
            "expiresAt": invoice.expires_at,
            "status": invoice.status,
            "paid": invoice.paid,
            "paidAt": invoice.paid_at,
            "withdrawn": invoice.withdrawn,
            "withdrawnAt": invoice.withdrawn_at,
            "requiredRaw": invoice.required_raw,
            "balanceRaw": invoice.balance_raw,
            "metaBalance": to_decimal_string(int(invoice.balance_raw), invoice.decimals),
            "lastCheckedAt": (
                invoice.last_checked_at if last_checked_at is None else last_checked_at
            ),
            "createdAt": invoice.created_at,
            "updatedAt": invoice.updated_at,
            "url": payment_url(payment_page_url, invoice.payment_address),
        }
    )
    token = invoice.token_address
    if token is not None and (invoice.chain_id, token.lower()) in x402:
        body["x402Url"] = payment_url(payment_page_url, invoice.payment_address) + "/x402"
    body.update(capture_fields(invoice))
    body.update(price_fields(invoice))
    if payments:
        body["payments"] = payments
    if refunds:
        body["refunds"] = refunds
    if other_balances:
        body["otherBalances"] = other_balances
    return body


def webhook_payload(invoice: Invoice) -> dict[str, Any]:
    """Body of the paid webhook; ``balance`` is its one JSON number (a float)."""
    meta_balance = to_decimal_string(int(invoice.balance_raw), invoice.decimals)
    return {
        "ownerAddress": invoice.owner_address,
        "chainId": invoice.chain_id,
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "salt": invoice.salt,
        "amount": invoice.amount,
        "tokenAddress": invoice.token_address,
        "status": "paid",
        "paid": True,
        "paidAt": invoice.paid_at,
        "requiredRaw": invoice.required_raw,
        "balanceRaw": invoice.balance_raw,
        "balance": float(Decimal(meta_balance)),
        "updatedAt": invoice.updated_at,
        # Beyond the interface's fields, like salt: whether the funds wait for a capture.
        "capture": invoice.capture,
        **price_fields(invoice),
        **subscription_field(invoice),
    }


# The caller of the invoices a subscription's charges create (``payments.subscriptions``):
# no owner's request authenticates this way, so no owner's metadata can pass for it.
SUBSCRIPTION_CALLER = "subscription"


def subscription_field(invoice: Invoice | InvoiceRow) -> dict[str, Any]:
    """``subscription``: ``{"id", "period"}`` of the subscription whose period's charge the
    invoice is; absent for any other invoice."""
    if invoice.auth_mode != SUBSCRIPTION_CALLER or not invoice.metadata_:
        return {}
    found = invoice.metadata_.get("subscription")
    if not isinstance(found, dict):
        return {}
    return {"subscription": {"id": found.get("id"), "period": found.get("period")}}


def capture_fields(invoice: Invoice | InvoiceRow) -> dict[str, Any]:
    """``capture`` (``automatic`` or ``manual``); for a manual-capture invoice also
    ``capturedAt`` and ``voidedAt``, null until it is captured or voided."""
    if invoice.capture == "automatic":
        return {"capture": invoice.capture}
    return {
        "capture": invoice.capture,
        "capturedAt": invoice.captured_at,
        "voidedAt": invoice.voided_at,
    }


def price_fields(invoice: Invoice | InvoiceRow) -> dict[str, Any]:
    """``fiat`` (the price locked at creation) and ``tolerance`` (the underpayment accepted),
    each present only when the invoice has one (docs/integration/pricing.md)."""
    fields: dict[str, Any] = {}
    if invoice.currency is not None:
        fiat: dict[str, Any] = {
            "currency": invoice.currency,
            "amount": invoice.fiat_amount,
            "rate": invoice.rate,
            "source": invoice.rate_source,
        }
        if invoice.feed_address is not None:
            fiat["feed"] = invoice.feed_address
            fiat["roundId"] = invoice.feed_round_id
            fiat["roundUpdatedAt"] = invoice.feed_updated_at
        fields["fiat"] = fiat
    if invoice.tolerance_bps:
        fields["tolerance"] = {
            "bps": invoice.tolerance_bps,
            "minimumRaw": str(least_paid_raw(invoice)),
            "acceptedUnder": invoice.shortfall_raw is not None,
            "shortfallRaw": invoice.shortfall_raw or "0",
        }
    return fields
