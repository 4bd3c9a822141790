"""Creates of one process, group-committed: concurrent requests share one transaction (a
``Coalescer``) that records the signed ones' replay keys, takes generated invoiceIds from the
owner's sequence, checks the watched cap and inserts the rows (``invoices.insert``); a batch
that fails is retried job by job, so one request's failure never becomes another's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from invoicing.auth.guard import Use, forget_uses_in, record_uses_in, replayed
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal
from invoicing.errors import InvoiceExists, RateLimited
from invoicing.invoices.insert import (
    advance_sequence,
    find_by_invoice_id,
    identical_row,
    insert_rows,
    skip_taken,
)
from invoicing.invoices.insert_one import insert_one
from invoicing.invoices.watched import WatchedCounts
from invoicing.notifications.signing import tolerances_of
from invoicing.tables.invoices import InvoiceRow

# A refused create waits for some of the owner's watched invoices to be paid, expire or be
# deleted; this is how soon it is worth asking again.
WATCHED_CAP_RETRY_AFTER_S = 60


class WatchedCapReached(RateLimited):
    """429 ``rate_limited``: the owner's watched invoices are at the cap (refused inside the
    create's transaction, unlike the request-rate limits refused before it)."""


@dataclass
class CreateJob:
    invoice: InvoiceRow
    generated: bool
    max_watched: int = 0
    # A signed request's replay key, recorded in the create's transaction (``auth.guard``).
    replay: Use | None = None


_Created = tuple[InvoiceRow, bool]


# Creates of this process are group-committed: concurrent requests share a transaction.
CREATOR: ProcessLocal[Coalescer[CreateJob, _Created]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_create_batch, db))
)
_WATCHED_COUNTS: ProcessLocal[WatchedCounts] = ProcessLocal(lambda _db: WatchedCounts())


async def _create_batch(db: Database, jobs: Sequence[CreateJob]) -> list[_Created | Exception]:
    """One transaction for the batch; if it fails, each job again in its own transaction, so
    one request's failure never becomes another's. On PostgreSQL a lone job is first tried
    as one statement without a transaction (``_insert_lone``): one round trip."""
    if len(jobs) == 1 and db.dialect == "postgresql":
        try:
            lone = await db.run_statement(
                functools.partial(_insert_lone, job=jobs[0], watched=_WATCHED_COUNTS.of(db))
            )
        except Exception as exc:
            return [await _create_alone_after(db, jobs[0], exc)]
        if not isinstance(lone, CreateJob):
            return [lone]
        jobs = [lone]
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


async def _create_alone_after(db: Database, job: CreateJob, exc: Exception) -> _Created | Exception:
    """After a failed transaction for ``job`` alone: a concurrent insert of the same invoiceId
    (by another process) answers like a retry; anything else is the job's error."""
    if not isinstance(exc, IntegrityError) or job.generated:
        return exc
    answer = await db.run_batch(functools.partial(_existing_retry, job=job))
    return exc if answer is None else answer


def _existing_retry(connection: Connection, job: CreateJob) -> _Created | Exception | None:
    """The answer to a job whose chosen invoiceId another process took meanwhile: a retry
    (its replay key recorded) or a conflict; None if there is no such invoice."""
    if job.replay is not None and not record_uses_in(connection, [job.replay])[0]:
        return replayed()
    existing = find_by_invoice_id(connection, job.invoice)
    try:
        if existing is None:
            return None
        return _same_or_conflict(existing, job.invoice), False
    except InvoiceExists as conflict:
        return conflict
    finally:
        if job.replay is not None and existing is None:
            forget_uses_in(connection, [job.replay])


def identical_retry(
    connection: Connection, key: tuple[str, int, str], request_hash: str, use: Use | None
) -> InvoiceRow | Exception | None:
    """``identical_row`` for a create that could not price its invoice; a signed request's
    replay key is recorded when the earlier invoice answers it."""
    if use is not None and not record_uses_in(connection, [use])[0]:
        return replayed()
    found = identical_row(connection, key, request_hash)
    if found is None and use is not None:
        forget_uses_in(connection, [use])
    return found


def _insert_lone(
    connection: Connection, job: CreateJob, watched: WatchedCounts
) -> _Created | Exception | CreateJob:
    """PostgreSQL, a lone job on an autocommit connection: under its owner's watched cap it is
    one statement (``insert_one``), atomic on its own. Answers the job's outcome, or the job
    to go on with in a transaction: over the cap, or its invoiceId taken (then its replay
    key is already recorded, its timestamp spent as by any request that reached the
    database, and the job goes on without it)."""
    if _over_watched_cap(connection, [job], watched):
        return job
    new, inserted = insert_one(connection, job.invoice, job.generated, job.replay)
    if not new:
        return replayed()
    if not inserted:
        return replace(job, replay=None)
    if job.max_watched > 0:
        watched.created(job.invoice.owner_key, 1)
    return job.invoice, True


def _create_in(
    connection: Connection, jobs: Sequence[CreateJob], watched: WatchedCounts | None = None
) -> list[_Created | Exception]:
    """Record the signed jobs' replay keys (a replay is refused), create the others
    (``_create_checked``). A job refused there (409, 429) keeps its key: its timestamp is
    spent, as it would be by any request that reached the database."""
    uses = [(index, job.replay) for index, job in enumerate(jobs) if job.replay is not None]
    if not uses:
        return _create_checked(connection, jobs, watched)
    fresh = record_uses_in(connection, [use for _, use in uses])
    replays = {index for (index, _), new in zip(uses, fresh, strict=True) if not new}
    others = [job for index, job in enumerate(jobs) if index not in replays]
    created = iter(_create_checked(connection, others, watched) if others else [])
    return [replayed() if i in replays else next(created) for i in range(len(jobs))]


def _create_checked(
    connection: Connection, jobs: Sequence[CreateJob], watched: WatchedCounts | None = None
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
    connection: Connection, jobs: Sequence[CreateJob], watched: WatchedCounts
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


def _refusal(connection: Connection, job: CreateJob) -> _Created | Exception:
    """An over-cap job: a retry of an existing invoice still gets it; anything new is 429."""
    if not job.generated:
        existing = find_by_invoice_id(connection, job.invoice)
        if existing is not None:
            try:
                return _same_or_conflict(existing, job.invoice), False
            except InvoiceExists as conflict:
                return conflict
    return WatchedCapReached(
        f"ownerAddress has {job.max_watched} invoices being watched, the most allowed; "
        "more can be created once some are paid, expire or are deleted",
        WATCHED_CAP_RETRY_AFTER_S,
    )


def _create_admitted(
    connection: Connection, jobs: Sequence[CreateJob]
) -> list[_Created | Exception]:
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
    # The sequence statement reads its owner's tolerance too; others are read in one query.
    tolerances: dict[str, int] = {}
    for (owner_key, chain_id), invoices in groups.items():
        last, tolerances[owner_key] = advance_sequence(
            connection, owner_key, chain_id, len(invoices)
        )
        for offset, invoice in enumerate(invoices):
            invoice.invoice_id = str(last - len(invoices) + 1 + offset)
        last_taken[(owner_key, chain_id)] = last
    unread = {job.invoice.owner_key for job in jobs} - tolerances.keys()
    if unread:
        tolerances.update(tolerances_of(connection, unread))
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
