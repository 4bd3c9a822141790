"""Creating invoices (docs/integration/invoices.md): idempotent by invoiceId, group-committed
per process.

Two limits of the service's settings (``CreateRules``) are checked here: a ``webhookUrl``
that can plainly never be delivered is refused (400, no DNS lookup), and an owner's watched
invoices are capped (429; ``invoices.watched``).

An ``amount`` given with a ``currency`` is a fiat price: it is locked into the asset's
``requiredRaw`` at creation (``pricing.quotes``), the invoice's ``amount`` is then that asset
amount (the interface's meaning), and a price read from a feed holds for the quote window
only: the invoice expires at its end (docs/integration/pricing.md). The owner's underpayment
tolerance is copied into each new row in the batch's transaction.

Creates are the API's hot write path. Concurrent requests of a process share one
transaction (a ``Coalescer``, :mod:`invoicing.invoices.create_batch`) that also records signed
requests' replay keys, the rows are written with one cached Core executemany
(:mod:`invoicing.invoices.insert`), and no ORM instance is built: a new invoice is an
``InvoiceRow`` (the values of its row) from the request to the response.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from invoicing import metrics
from invoicing.auth.guard import Caller
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database
from invoicing.errors import (
    ChainUnavailable,
    InvalidRequest,
    PriceUnavailable,
    UnsupportedToken,
)
from invoicing.invoices.amounts import to_decimal_string, to_raw
from invoicing.invoices.create_batch import CREATOR, CreateJob, identical_retry
from invoicing.invoices.insert import (
    time_ordered_id,
)
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.links import link_problem
from invoicing.outbound.guard import webhook_url_problem
from invoicing.pricing.currencies import parse_currency, parse_fiat_amount
from invoicing.pricing.quotes import CHAINLINK, Quote, quote
from invoicing.tables.invoices import InvoiceRow


@dataclass(frozen=True)
class NewInvoice:
    """A validated create request (addresses already checksummed)."""

    owner_address: str
    chain_id: int
    amount: str
    invoice_id: str | None = None
    token_address: str | None = None
    webhook_url: str | None = None
    description: str | None = None
    expires_at: int | None = None
    metadata: dict[str, Any] | None = None
    redirect_url: str | None = None
    cancel_url: str | None = None
    currency: str | None = None  # given: ``amount`` is in this ISO 4217 currency
    capture: str = "automatic"  # ``manual``: swept only once captured (``invoices.capture``)
    # The escrow's salt when the caller derives it (a subscription's period); else random.
    salt: bytes | None = None

    def request_hash(self) -> str:
        fields: dict[str, Any] = {
            "chainId": self.chain_id,
            "amount": self.amount,
            "tokenAddress": (self.token_address or "").lower() or None,
            "webhookUrl": self.webhook_url,
            "description": self.description,
            "expiresAt": self.expires_at,
            "metadata": self.metadata,
        }
        # Only when given: the hashes of invoices created before these fields stay the same.
        if self.redirect_url is not None:
            fields["redirectUrl"] = self.redirect_url
        if self.cancel_url is not None:
            fields["cancelUrl"] = self.cancel_url
        if self.currency is not None:  # invoices without one keep their hashes
            fields["currency"] = self.currency
        if self.capture != "automatic":  # so do automatic-capture ones
            fields["capture"] = self.capture
        return hashlib.sha256(_HASH_ENCODER.encode(fields).encode()).hexdigest()


# json.dumps(sort_keys=True, separators=(",", ":")), built once instead of at every create.
_HASH_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class CreateRules:
    """What the service's settings ask of a new invoice (the defaults check nothing)."""

    max_watched_per_owner: int = 0  # 0: no cap
    require_https_webhook: bool = False
    # redirectUrl and cancelUrl must be https (outside development).
    require_https_links: bool = False
    allow_private_webhook: bool = True
    # The escrow's low-rate lifetime checks start when this window after expiry is over.
    late_payment_window_s: int = 0
    # How long a price read from a feed holds: the invoice expires at the end of it.
    quote_window_s: int = 900


async def create_invoice(
    db: Database,
    chain: ChainGateway,
    request: NewInvoice,
    caller: Caller,
    now_ms: int,
    default_expiry_s: int,
    rules: CreateRules = CreateRules(),
) -> tuple[InvoiceRow, bool]:
    """Create an invoice; returns (invoice, created). An identical retry returns the original."""
    if request.webhook_url is not None:
        problem = webhook_url_problem(
            request.webhook_url,
            require_https=rules.require_https_webhook,
            allow_private=rules.allow_private_webhook,
        )
        if problem is not None:
            raise InvalidRequest(f"webhookUrl: {problem}", {"field": "webhookUrl"})
    for field, url in (("redirectUrl", request.redirect_url), ("cancelUrl", request.cancel_url)):
        if url is not None and (
            problem := link_problem(url, require_https=rules.require_https_links)
        ):
            raise InvalidRequest(f"{field}: {problem}", {"field": field})
    if request.token_address is None:
        decimals = chain.config.native_decimals
    else:
        decimals = allowed_token_decimals(chain, request.token_address)
    expires_at = request.expires_at or now_ms + default_expiry_s * 1000
    if expires_at <= now_ms:
        raise InvalidRequest("expiresAt is in the past", {"field": "expiresAt"})
    price: Quote | None = None
    if request.currency is None:
        required_raw = to_raw(request.amount, decimals)
        amount = request.amount
    else:
        currency = parse_currency(request.currency)
        fiat = parse_fiat_amount(request.amount, currency)
        try:
            price = await quote(
                chain, request.token_address, decimals, currency, request.amount, fiat, now_ms
            )
        except (PriceUnavailable, ChainUnavailable):
            # An identical retry still gets the invoice it created, price read or not.
            key = (request.owner_address.lower(), request.chain_id, request.invoice_id or "")
            same = functools.partial(
                identical_retry,
                key=key,
                request_hash=request.request_hash(),
                use=caller.replay_key(),
            )
            earlier = await db.run_batch(same) if request.invoice_id else None
            if isinstance(earlier, Exception):
                raise earlier from None
            if earlier is None:
                raise
            return earlier, False
        required_raw = price.required_raw
        amount = to_decimal_string(required_raw, decimals)
        if price.source == CHAINLINK:
            expires_at = min(expires_at, now_ms + rules.quote_window_s * 1000)
    salt = request.salt or os.urandom(32)
    row = InvoiceRow(
        id=time_ordered_id(now_ms),
        owner_address=request.owner_address,
        owner_key=request.owner_address.lower(),
        chain_id=request.chain_id,
        invoice_id=request.invoice_id or "",
        payment_address=chain.escrow_address(request.owner_address, salt),
        salt="0x" + salt.hex(),
        amount=amount,
        token_address=request.token_address,
        decimals=decimals,
        required_raw=str(required_raw),
        description=request.description,
        metadata_=request.metadata,
        webhook_url=request.webhook_url,
        expires_at=expires_at,
        status=InvoiceStatus.PENDING,
        paid=False,
        paid_at=None,
        withdrawn=False,
        withdrawn_at=None,
        balance_raw="0",
        last_checked_at=now_ms,
        created_at=now_ms,
        updated_at=now_ms,
        deleted_at=None,
        auth_mode=caller.mode,
        api_key_id=caller.api_key_id,
        auth_signature=caller.signature,
        auth_timestamp=caller.timestamp,
        request_hash=request.request_hash(),
        watch=True,
        swept_raw="0",
        lifetime_check_at=expires_at + rules.late_payment_window_s * 1000,
        has_extras=False,
        redirect_url=request.redirect_url,
        cancel_url=request.cancel_url,
        capture=request.capture,
        **({} if price is None else price.row_values()),
    )
    job = CreateJob(
        row, request.invoice_id is None, rules.max_watched_per_owner, caller.replay_key()
    )
    invoice, created = await CREATOR.of(db).submit(job)
    if created:
        metrics.invoice_created(invoice.chain_id)
    return invoice, created


def allowed_token_decimals(chain: ChainGateway, token_address: str) -> int:
    """The configured decimals of an allow-listed token. Any other address is refused
    without a call to it: a hostile contract never runs on the request path."""
    token = chain.config.token(token_address)
    if token is None:
        raise UnsupportedToken(
            f"tokenAddress is not accepted on chain {chain.config.chain_id}",
            {"field": "tokenAddress", "chainId": chain.config.chain_id},
        )
    return token.decimals
