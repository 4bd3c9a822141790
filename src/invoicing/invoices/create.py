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
transaction (a ``Coalescer``), the rows are written with one cached Core executemany
(:mod:`invoicing.invoices.insert`), and no ORM instance is built: a new invoice is an
``InvoiceRow`` (the values of its row) from the request to the response.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from invoicing import metrics
from invoicing.auth.guard import Caller
from invoicing.chain.gateway import ChainGateway
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal
from invoicing.errors import (
    ChainUnavailable,
    InvalidRequest,
    InvoiceExists,
    PriceUnavailable,
    RateLimited,
    UnsupportedToken,
)
from invoicing.invoices.amounts import to_decimal_string, to_raw
from invoicing.invoices.insert import (
    advance_sequence,
    find_by_invoice_id,
    identical_row,
    insert_rows,
    skip_taken,
    time_ordered_id,
)
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.links import link_problem
from invoicing.invoices.models import InvoiceRow
from invoicing.invoices.watched import WatchedCounts
from invoicing.notifications.guard import webhook_url_problem
from invoicing.notifications.signing import tolerances_of
from invoicing.pricing.currencies import parse_currency, parse_fiat_amount
from invoicing.pricing.quotes import CHAINLINK, Quote, quote


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
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


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


# A refused create waits for some of the owner's watched invoices to be paid, expire or be
# deleted; this is how soon it is worth asking again.
WATCHED_CAP_RETRY_AFTER_S = 60


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
            same = functools.partial(identical_row, key=key, request_hash=request.request_hash())
            earlier = await db.run_batch(same) if request.invoice_id else None
            if earlier is None:
                raise
            return earlier, False
        required_raw = price.required_raw
        amount = to_decimal_string(required_raw, decimals)
        if price.source == CHAINLINK:
            expires_at = min(expires_at, now_ms + rules.quote_window_s * 1000)
    salt = os.urandom(32)
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
        **({} if price is None else price.row_values()),
    )
    job = _Job(row, request.invoice_id is None, rules.max_watched_per_owner)
    invoice, created = await _CREATOR.of(db).submit(job)
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


@dataclass
class _Job:
    invoice: InvoiceRow
    generated: bool
    max_watched: int = 0


_Created = tuple[InvoiceRow, bool]


# Creates of this process are group-committed: concurrent requests share a transaction.
_CREATOR: ProcessLocal[Coalescer[_Job, _Created]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_create_batch, db))
)
_WATCHED_COUNTS: ProcessLocal[WatchedCounts] = ProcessLocal(lambda _db: WatchedCounts())


async def _create_batch(db: Database, jobs: Sequence[_Job]) -> list[_Created | Exception]:
    """One transaction for the batch; if it fails, each job again in its own transaction, so
    one request's failure never becomes another's."""
    try:
        return await db.run_batch(
            functools.partial(_create_in, jobs=jobs, watched=_WATCHED_COUNTS.of(db))
        )
    except Exception as exc:
        if len(jobs) == 1:
            return [await _create_alone_after(db, jobs[0], exc)]
    outcomes: list[_Created | Exception] = []
    for job in jobs:
        try:
            outcomes.extend(
                await db.run_batch(
                    functools.partial(_create_in, jobs=[job], watched=_WATCHED_COUNTS.of(db))
                )
            )
        except Exception as exc:
            outcomes.append(await _create_alone_after(db, job, exc))
    return outcomes


async def _create_alone_after(db: Database, job: _Job, exc: Exception) -> _Created | Exception:
    """After a failed transaction for ``job`` alone: a concurrent insert of the same invoiceId
    (by another process) answers like a retry; anything else is the job's error."""
    if not isinstance(exc, IntegrityError) or job.generated:
        return exc
    existing = await db.run_batch(functools.partial(find_by_invoice_id, invoice=job.invoice))
    if existing is None:
        return exc
    try:
        return _same_or_conflict(existing, job.invoice), False
    except InvoiceExists as conflict:
        return conflict


def _create_in(
    connection: Connection, jobs: Sequence[_Job], watched: WatchedCounts | None = None
) -> list[_Created | Exception]:
    """Refuse the jobs over their owner's watched cap, create the others (``_create_admitted``)."""
    refused = _over_watched_cap(connection, jobs, watched or WatchedCounts())
    if not refused:
        outcomes = _create_admitted(connection, jobs)
    else:
        others = [job for index, job in enumerate(jobs) if index not in refused]
        admitted = iter(_create_admitted(connection, others) if others else [])
        outcomes = [
            _refusal(connection, job) if index in refused else next(admitted)
            for index, job in enumerate(jobs)
        ]
    if watched is not None:
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.max_watched > 0 and isinstance(outcome, tuple) and outcome[1]:
                watched.created(job.invoice.owner_key, 1)
    return outcomes


def _over_watched_cap(
    connection: Connection, jobs: Sequence[_Job], watched: WatchedCounts
) -> set[int]:
    """Indexes of the jobs that would take their owner past the cap of watched invoices."""
    by_owner: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        if job.max_watched > 0:
            by_owner.setdefault(job.invoice.owner_key, []).append(index)
    refused: set[int] = set()
    for owner_key, indexes in by_owner.items():
        cap = jobs[indexes[0]].max_watched
        room = watched.room(connection, owner_key, cap, len(indexes))
        refused.update(indexes[room:])
    return refused


def _refusal(connection: Connection, job: _Job) -> _Created | Exception:
    """An over-cap job: a retry of an existing invoice still gets it; anything new is 429."""
    if not job.generated:
        existing = find_by_invoice_id(connection, job.invoice)
        if existing is not None:
            try:
                return _same_or_conflict(existing, job.invoice), False
            except InvoiceExists as conflict:
                return conflict
    return RateLimited(
        f"ownerAddress has {job.max_watched} invoices being watched, the most allowed; "
        "more can be created once some are paid, expire or are deleted",
        WATCHED_CAP_RETRY_AFTER_S,
    )


def _create_admitted(connection: Connection, jobs: Sequence[_Job]) -> list[_Created | Exception]:
    """Insert the jobs' invoices in one statement where possible.

    Generated ids: one sequence upsert per owner and chain takes a block of numbers. Rows
    the insert skipped (ON CONFLICT DO NOTHING) are handled one by one: a generated id the
    owner had chosen moves on to the next free one; a chosen id that exists is a retry (200)
    or a conflict (409)."""
    groups: dict[tuple[str, int], list[InvoiceRow]] = {}
    for job in jobs:
        if job.generated:
            key = (job.invoice.owner_key, job.invoice.chain_id)
            groups.setdefault(key, []).append(job.invoice)
    last_taken: dict[tuple[str, int], int] = {}
    for (owner_key, chain_id), invoices in groups.items():
        last = advance_sequence(connection, owner_key, chain_id, len(invoices))
        for offset, invoice in enumerate(invoices):
            invoice.invoice_id = str(last - len(invoices) + 1 + offset)
        last_taken[(owner_key, chain_id)] = last
    tolerances = tolerances_of(connection, {job.invoice.owner_key for job in jobs})
    for job in jobs:
        job.invoice.tolerance_bps = tolerances.get(job.invoice.owner_key, 0)
    inserted = insert_rows(connection, [job.invoice for job in jobs])
    outcomes: list[_Created | Exception] = []
    for job in jobs:
        invoice = job.invoice
        if invoice.id in inserted:
            outcomes.append((invoice, True))
        elif job.generated:
            skip_taken(connection, invoice, last_taken)
            if not insert_rows(connection, [invoice]):
                raise RuntimeError("generated invoiceId taken inside its transaction")
            outcomes.append((invoice, True))
        else:
            existing = find_by_invoice_id(connection, invoice)
            if existing is None:
                raise RuntimeError("invoiceId conflict without an existing invoice")
            try:
                outcomes.append((_same_or_conflict(existing, invoice), False))
            except InvoiceExists as conflict:
                outcomes.append(conflict)
    return outcomes


def _same_or_conflict(existing: InvoiceRow, attempted: InvoiceRow) -> InvoiceRow:
    if existing.request_hash != attempted.request_hash or existing.deleted_at is not None:
        raise InvoiceExists(
            "an invoice with this invoiceId already exists for this owner and chain",
            {"invoiceId": existing.invoice_id, "chainId": existing.chain_id},
        )
    return existing
