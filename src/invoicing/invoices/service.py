"""Invoice use cases: create (idempotent by invoiceId), find, list, delete."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from eth_utils.address import to_checksum_address
from sqlalchemy import Table, func, inspect, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.guard import Caller
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database, GroupCommit
from invoicing.errors import InvalidRequest, InvoiceExists, NotFound
from invoicing.invoices.amounts import to_raw
from invoicing.invoices.models import Invoice, InvoiceStatus, OwnerSequence


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

    def request_hash(self) -> str:
        fields = {
            "chainId": self.chain_id,
            "amount": self.amount,
            "tokenAddress": (self.token_address or "").lower() or None,
            "webhookUrl": self.webhook_url,
            "description": self.description,
            "expiresAt": self.expires_at,
            "metadata": self.metadata,
        }
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


async def create_invoice(
    db: Database,
    chain: ChainGateway,
    request: NewInvoice,
    caller: Caller,
    now_ms: int,
    default_expiry_s: int,
) -> tuple[Invoice, bool]:
    """Create an invoice; returns (invoice, created). An identical retry returns the original."""
    if request.token_address is None:
        decimals = chain.config.native_decimals
    else:
        decimals = await chain.token_decimals(request.token_address)
    required_raw = to_raw(request.amount, decimals)
    expires_at = request.expires_at or now_ms + default_expiry_s * 1000
    if expires_at <= now_ms:
        raise InvalidRequest("expiresAt is in the past", {"field": "expiresAt"})
    salt = os.urandom(32)
    invoice = Invoice(
        id=str(uuid.uuid4()),
        owner_address=request.owner_address,
        owner_key=request.owner_address.lower(),
        chain_id=request.chain_id,
        payment_address=chain.escrow_address(request.owner_address, salt),
        salt="0x" + salt.hex(),
        amount=request.amount,
        token_address=request.token_address,
        decimals=decimals,
        required_raw=str(required_raw),
        description=request.description,
        metadata_=request.metadata,
        webhook_url=request.webhook_url,
        expires_at=expires_at,
        status=InvoiceStatus.PENDING,
        paid=False,
        withdrawn=False,
        balance_raw="0",
        last_checked_at=now_ms,
        created_at=now_ms,
        updated_at=now_ms,
        auth_mode=caller.mode,
        api_key_id=caller.api_key_id,
        auth_signature=caller.signature,
        auth_timestamp=caller.timestamp,
        request_hash=request.request_hash(),
        watch=True,
        next_check_at=now_ms,
        swept_raw="0",
    )
    invoice.invoice_id = request.invoice_id or ""
    return await _creator(db).submit(_Job(invoice, generated=request.invoice_id is None))


@dataclass
class _Job:
    invoice: Invoice
    generated: bool


_Created = tuple[Invoice, bool]
_creators: weakref.WeakKeyDictionary[Database, GroupCommit[_Job, _Created]] = (
    weakref.WeakKeyDictionary()
)


def _creator(db: Database) -> GroupCommit[_Job, _Created]:
    """Creates of this process are group-committed: concurrent requests share a transaction."""
    creator = _creators.get(db)
    if creator is None:

        async def run(jobs: Sequence[_Job]) -> list[_Created | Exception]:
            return await _create_batch(db, jobs)

        creator = _creators[db] = GroupCommit(run)
    return creator


async def _create_batch(db: Database, jobs: Sequence[_Job]) -> list[_Created | Exception]:
    """One transaction for the batch; if it fails, each job again in its own transaction, so
    one request's failure never becomes another's."""
    try:
        async with db.transaction() as session:
            return await _create_in(session, jobs)
    except Exception as exc:
        if len(jobs) == 1:
            return [await _create_alone_after(db, jobs[0], exc)]
    outcomes: list[_Created | Exception] = []
    for job in jobs:
        try:
            async with db.transaction() as session:
                outcomes.extend(await _create_in(session, [job]))
        except Exception as exc:
            outcomes.append(await _create_alone_after(db, job, exc))
    return outcomes


async def _create_alone_after(db: Database, job: _Job, exc: Exception) -> _Created | Exception:
    """After a failed transaction for ``job`` alone: a concurrent insert of the same invoiceId
    (by another process) answers like a retry; anything else is the job's error."""
    if not isinstance(exc, IntegrityError) or job.generated:
        return exc
    async with db.sessions() as session:
        existing = await _find_by_invoice_id(session, job.invoice)
    if existing is None:
        return exc
    try:
        return _same_or_conflict(existing, job.invoice), False
    except InvoiceExists as conflict:
        return conflict


async def _create_in(session: AsyncSession, jobs: Sequence[_Job]) -> list[_Created | Exception]:
    """Insert the jobs' invoices in one statement where possible.

    Generated ids: one sequence upsert per owner and chain takes a block of numbers. Rows
    the insert skipped (ON CONFLICT DO NOTHING) are handled one by one: a generated id the
    owner had chosen moves on to the next free one; a chosen id that exists is a retry (200)
    or a conflict (409)."""
    groups: dict[tuple[str, int], list[Invoice]] = {}
    for job in jobs:
        if job.generated:
            key = (job.invoice.owner_key, job.invoice.chain_id)
            groups.setdefault(key, []).append(job.invoice)
    last_taken: dict[tuple[str, int], int] = {}
    for (owner_key, chain_id), invoices in groups.items():
        last = await _advance_sequence(session, owner_key, chain_id, len(invoices))
        for offset, invoice in enumerate(invoices):
            invoice.invoice_id = str(last - len(invoices) + 1 + offset)
        last_taken[(owner_key, chain_id)] = last
    inserted = await _insert(session, [job.invoice for job in jobs])
    outcomes: list[_Created | Exception] = []
    for job in jobs:
        invoice = job.invoice
        if invoice.id in inserted:
            outcomes.append((invoice, True))
        elif job.generated:
            await _skip_taken(session, invoice, last_taken)
            if not await _insert(session, [invoice]):
                raise RuntimeError("generated invoiceId taken inside its transaction")
            outcomes.append((invoice, True))
        else:
            existing = await _find_by_invoice_id(session, invoice)
            if existing is None:
                raise RuntimeError("invoiceId conflict without an existing invoice")
            try:
                outcomes.append((_same_or_conflict(existing, invoice), False))
            except InvoiceExists as conflict:
                outcomes.append(conflict)
    return outcomes


_INVOICES = cast(Table, Invoice.__table__)
_INVOICE_COLUMNS = [(attr.key, attr.columns[0].key) for attr in inspect(Invoice).column_attrs]


async def _insert(session: AsyncSession, invoices: Sequence[Invoice]) -> set[str]:
    """Insert the rows in one statement; returns the ids of those inserted, leaving out rows
    whose (owner, chain, invoiceId) is already taken.

    A Core statement instead of the unit of work: no flush bookkeeping, and the idempotency
    check folds into the insert (ON CONFLICT DO NOTHING RETURNING)."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    rows = [
        {column: getattr(invoice, attr) for attr, column in _INVOICE_COLUMNS}
        for invoice in invoices
    ]
    statement = (
        insert(_INVOICES)
        .values(rows)
        .on_conflict_do_nothing(
            index_elements=[Invoice.owner_key, Invoice.chain_id, Invoice.invoice_id]
        )
        .returning(Invoice.id)
    )
    return {str(row_id) for row_id in (await session.scalars(statement))}


def _same_or_conflict(existing: Invoice, attempted: Invoice) -> Invoice:
    if existing.request_hash != attempted.request_hash or existing.deleted_at is not None:
        raise InvoiceExists(
            "an invoice with this invoiceId already exists for this owner and chain",
            {"invoiceId": existing.invoice_id, "chainId": existing.chain_id},
        )
    return existing


async def _find_by_invoice_id(session: AsyncSession, invoice: Invoice) -> Invoice | None:
    result = await session.scalar(
        select(Invoice).where(
            Invoice.owner_key == invoice.owner_key,
            Invoice.chain_id == invoice.chain_id,
            Invoice.invoice_id == invoice.invoice_id,
        )
    )
    return result


async def _advance_sequence(
    session: AsyncSession, owner_key: str, chain_id: int, count: int
) -> int:
    """Take the owner's next ``count`` sequence numbers; returns the last one.

    One upsert both creates the counter and advances it; the row lock it takes serializes
    concurrent creators for the same owner and chain (on every API process)."""
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    advance = (
        insert(OwnerSequence)
        .values(owner_key=owner_key, chain_id=chain_id, next_value=count + 1)
        .on_conflict_do_update(
            index_elements=[OwnerSequence.owner_key, OwnerSequence.chain_id],
            set_={"next_value": OwnerSequence.next_value + count},
        )
        .returning(OwnerSequence.next_value)
    )
    return int((await session.execute(advance)).scalar_one()) - 1


async def _skip_taken(
    session: AsyncSession, invoice: Invoice, last_taken: dict[tuple[str, int], int]
) -> None:
    """Move the invoice's generated id past every taken one (ids the owner chose, or given
    to others of this batch); advance the stored counter if the id went beyond it."""
    value = int(invoice.invoice_id)
    while await _find_by_invoice_id(session, invoice) is not None:
        value += 1
        invoice.invoice_id = str(value)
    key = (invoice.owner_key, invoice.chain_id)
    if value > last_taken[key]:
        last_taken[key] = value
        await session.execute(
            update(OwnerSequence)
            .where(OwnerSequence.owner_key == key[0], OwnerSequence.chain_id == key[1])
            .values(next_value=value + 1)
        )


async def find_by_payment_address(db: Database, owner_key: str, payment_address: str) -> Invoice:
    """The owner's invoice at that escrow; 404 also when it belongs to another owner.

    Concurrent lookups of this process share one query (this is the status lookup's hot
    path); a lookup always waits for a query that starts after it.
    """
    address = _stored_form(payment_address)
    invoice = None if address is None else await _finder(db).submit((db, address))
    if invoice is None or invoice.owner_key != owner_key:
        raise NotFound("no invoice with this paymentAddress for this owner")
    return invoice


@functools.lru_cache(maxsize=4096)
def _stored_form(payment_address: str) -> str | None:
    """Escrow addresses are stored checksummed, so an exact match uses the unique index
    (keccak is costly and a status lookup asks for the same address again and again)."""
    try:
        return str(to_checksum_address(payment_address))
    except ValueError:
        return None


_Lookup = tuple[Database, str]
_finders: weakref.WeakKeyDictionary[Database, GroupCommit[_Lookup, Invoice | None]] = (
    weakref.WeakKeyDictionary()
)


def _finder(db: Database) -> GroupCommit[_Lookup, Invoice | None]:
    finder = _finders.get(db)
    if finder is None:
        finder = _finders[db] = GroupCommit(_find_batch, max_batch=500)
    return finder


async def _find_batch(lookups: Sequence[_Lookup]) -> list[Invoice | None | Exception]:
    """The invoices at a batch of escrow addresses (one query; ``None`` where there is none).
    Callers share the loaded objects, so they must not change them."""
    db = lookups[0][0]
    addresses = {address for _db, address in lookups}
    async with db.sessions() as session:
        rows = await session.scalars(select(Invoice).where(Invoice.payment_address.in_(addresses)))
        found = {invoice.payment_address: invoice for invoice in rows}
    return [found.get(address) for _db, address in lookups]


@dataclass(frozen=True)
class InvoiceFilter:
    owner_key: str
    chain_id: int | None = None
    status: str | None = None
    paid: bool | None = None
    token_address: str | None = None
    invoice_id: str | None = None
    date_from: int | None = None
    date_to: int | None = None
    page: int = 1
    limit: int = 20


async def list_invoices(db: Database, query: InvoiceFilter) -> tuple[list[Invoice], int]:
    conditions: list[Any] = [Invoice.owner_key == query.owner_key]
    if query.status == InvoiceStatus.CANCELLED:
        conditions.append(Invoice.status == InvoiceStatus.CANCELLED)
    else:
        conditions.append(Invoice.deleted_at.is_(None))
        if query.status is not None:
            conditions.append(Invoice.status == query.status)
    if query.chain_id is not None:
        conditions.append(Invoice.chain_id == query.chain_id)
    if query.paid is not None:
        conditions.append(Invoice.paid.is_(query.paid))
    if query.token_address is not None:
        conditions.append(func.lower(Invoice.token_address) == query.token_address.lower())
    if query.invoice_id is not None:
        conditions.append(Invoice.invoice_id == query.invoice_id)
    if query.date_from is not None:
        conditions.append(Invoice.created_at >= query.date_from)
    if query.date_to is not None:
        conditions.append(Invoice.created_at <= query.date_to)
    async with db.sessions() as session:
        total = await session.scalar(select(func.count()).select_from(Invoice).where(*conditions))
        rows = await session.scalars(
            select(Invoice)
            .where(*conditions)
            .order_by(Invoice.created_at.desc(), Invoice.id)
            .offset((query.page - 1) * query.limit)
            .limit(query.limit)
        )
        return list(rows), int(total or 0)


async def delete_invoice(
    db: Database, owner_key: str, chain_id: int, invoice_id: str, now_ms: int
) -> Invoice:
    """Soft delete. Pending/expired → cancelled; paid/completed keep their status and are
    still withdrawn to the owner. Monitoring stops except where funds must still be swept."""
    async with db.transaction() as session:
        invoice = await session.scalar(
            select(Invoice)
            .where(
                Invoice.owner_key == owner_key,
                Invoice.chain_id == chain_id,
                Invoice.invoice_id == invoice_id,
                Invoice.deleted_at.is_(None),
            )
            .with_for_update()
        )
        if invoice is None:
            raise NotFound("no such invoice for this owner and chain")
        if invoice.status in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED):
            invoice.status = InvoiceStatus.CANCELLED
        invoice.deleted_at = now_ms
        invoice.watch = False
        invoice.updated_at = now_ms
        return invoice
