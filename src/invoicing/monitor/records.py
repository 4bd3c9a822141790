"""The payments of record: the monitor's step that finds the transfers behind balance changes
(``invoices.payments``) and keeps them true to the chain.

The passes queue a scan for every escrow whose balance they saw change (and only those); this
step runs beside them, never before them, so marking paid never waits for it. Each run:

1. takes up to ``SCAN_BATCH`` queued scans of the chain, of the invoices in the shards the
   worker holds (two workers do not read the same transfers); for each token one
   ``eth_getLogs`` over the scans' blocks (``Transfer`` logs to those escrows), for the
   native coin one block read with its traces per block (``chain.transfers``), and each
   block's time once for the blocks transfers were found in; records what it found (a
   transfer already recorded is left as it is), emits ``invoice.payment_recorded`` with the
   new records, drops the scans it covered and releases the held paid webhooks of their
   invoices with their ``payments`` (``invoices.payments.release_paid_webhooks``); while a
   batch is full it takes the next, up to ``RUN_BATCHES``, so that a burst of payments is
   recorded and its webhooks released in one run, not a batch per trigger;
2. checks the hash of every block that holds records not yet final: a record whose block is
   no longer on the chain (a reorg) is deleted and its escrow scanned again from that block;
   a record ``FINAL_BLOCKS`` below the head is final and no longer checked.

At rest (no scan queued, every record final) a run reads the database once and sends no RPC
call. The balance stays the truth for paid; these records are what people read.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.gateway import ChainGateway
from invoicing.chain.transfers import Transfer
from invoicing.db import upsert
from invoicing.invoices.lifecycle import InvoiceEvent
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.payments import (
    payment_view,
    queue_scans,
    release_paid_webhooks,
    scan_of,
)
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.records import PaymentRecord, PaymentScan

log = logging.getLogger(__name__)

# Scans taken per batch (each its own transaction: the first webhooks of a burst go out
# while the rest are being recorded; each batch reads the blocks of its scans once). At
# most a few hundred: dropping the covered scans is an OR of a condition per scan, and
# SQLite allows expressions 1,000 deep.
SCAN_BATCH = 250
# Batches per run at most (the rest wait for the next run).
RUN_BATCHES = 40
# Blocks under the head after which a record's block is final (no reorg goes deeper on the
# chains the service runs on; a chain's confirmations add to it).
FINAL_BLOCKS = 64
# Blocks of a scan searched for native transfers per run (one block read each), newest
# first: a longer scan (a late transfer first seen by the sweep, long after the invoice's
# last reading) is narrowed to the blocks still unread and goes on at the next runs.
NATIVE_SCAN_BLOCKS = 512
# Blocks per eth_getLogs call (within what public RPC providers allow).
LOG_RANGE_BLOCKS = 5000


@dataclass(frozen=True)
class _Scan:
    invoice_id: str
    from_block: int
    to_block: int
    escrow: str
    token: str | None


@dataclass(frozen=True)
class RecordsResult:
    scanned: int = 0
    recorded: int = 0
    removed: int = 0


async def run_records_step(
    services: Services, chain: ChainGateway, head: int, shards: Sequence[int] | None = None
) -> RecordsResult:
    """One run of the step on ``chain`` (``head``: the block the monitor last read at) for
    the invoices of ``shards`` (None: every invoice of the chain)."""
    scanned = recorded = 0
    for _ in range(RUN_BATCHES):
        taken, made = await _scan(services, chain, shards)
        scanned, recorded = scanned + taken, recorded + made
        if taken < SCAN_BATCH:
            break
    removed = await _recheck(services, chain, head)
    return RecordsResult(scanned, recorded, removed)


async def _scan(
    services: Services, chain: ChainGateway, shards: Sequence[int] | None
) -> tuple[int, int]:
    chain_id = chain.config.chain_id
    query = (
        select(
            PaymentScan.invoice_id,
            PaymentScan.from_block,
            PaymentScan.to_block,
            Invoice.payment_address,
            Invoice.token_address,
        )  # fmt: skip
        .join(Invoice, Invoice.id == PaymentScan.invoice_id)
        .where(PaymentScan.chain_id == chain_id)
        .order_by(PaymentScan.to_block)
        .limit(SCAN_BATCH)
    )
    if shards is not None:
        query = query.where(Invoice.shard.in_(shards))
    async with services.db.sessions() as session:
        scans = [_Scan(*row) for row in await session.execute(query)]
    if not scans:
        return 0, 0
    found = await _transfers(chain, scans)
    times = {number: await chain.block_timestamp(number) * 1000 for number in _blocks(found)}
    recorded = await _record(services, chain_id, scans, found, times)
    return len(scans), recorded


async def _transfers(chain: ChainGateway, scans: Sequence[_Scan]) -> list[tuple[str, Transfer]]:
    """(invoice id, transfer) of every transfer into the scans' escrows in their blocks."""
    invoice_of = {scan.escrow: scan.invoice_id for scan in scans}
    by_token: dict[str | None, list[_Scan]] = defaultdict(list)
    for scan in scans:
        by_token[scan.token].append(scan)
    found: list[Transfer] = []
    for token, group in by_token.items():
        if token is None:
            found += await _native(chain, group)
            continue
        low = min(scan.from_block for scan in group)
        high = max(scan.to_block for scan in group)
        escrows = sorted({scan.escrow for scan in group})
        for start in range(low, high + 1, LOG_RANGE_BLOCKS):
            end = min(high, start + LOG_RANGE_BLOCKS - 1)
            found += await chain.token_transfers(token, escrows, start, end)
    return [(invoice_of[t.to], t) for t in found if t.to in invoice_of]


def _blocks(found: Sequence[tuple[str, Transfer]]) -> list[int]:
    """The blocks the transfers found lie in (each block's time is read once)."""
    return sorted({transfer.block_number for _, transfer in found})


def _first_read(scan: _Scan) -> int:
    """The first block of ``scan`` this run reads: all of a token's, the newest
    ``NATIVE_SCAN_BLOCKS`` of the native coin's."""
    if scan.token is not None:
        return scan.from_block
    return max(scan.from_block, scan.to_block - NATIVE_SCAN_BLOCKS + 1)


async def _native(chain: ChainGateway, scans: Sequence[_Scan]) -> list[Transfer]:
    escrows_at: dict[int, set[str]] = defaultdict(set)
    for scan in scans:
        for block in range(_first_read(scan), scan.to_block + 1):
            escrows_at[block].add(scan.escrow)
    found: list[Transfer] = []
    for block in sorted(escrows_at):
        found += await chain.native_transfers(sorted(escrows_at[block]), block)
    return found


async def _record(
    services: Services,
    chain_id: int,
    scans: Sequence[_Scan],
    found: Sequence[tuple[str, Transfer]],
    times: dict[int, int],
) -> int:
    """Write the transfers found (those not recorded yet), their events, and drop the scans
    covered (a scan widened meanwhile by a newer change stays); a native scan read only in
    part is narrowed to its blocks still unread."""
    now_ms = services.clock.now_ms()
    token_of = {scan.invoice_id: scan.token for scan in scans}
    async with services.db.transaction() as session:
        known = set()
        if found:
            known = set(
                await session.execute(
                    select(
                        PaymentRecord.invoice_id, PaymentRecord.tx_hash, PaymentRecord.source
                    ).where(PaymentRecord.invoice_id.in_({i for i, _ in found}))
                )
            )
        new = {
            (invoice_id, t.tx_hash, t.source): _row(
                invoice_id, chain_id, token_of, t, times, now_ms
            )
            for invoice_id, t in found
            if (invoice_id, t.tx_hash, t.source) not in known
        }
        if new:
            # Only what this transaction inserted is announced: the step of another monitor
            # process may record the same transfers at the same time.
            insert = upsert(services.db.dialect, PaymentRecord).on_conflict_do_nothing()
            inserted = await session.execute(
                insert.returning(
                    PaymentRecord.invoice_id, PaymentRecord.tx_hash, PaymentRecord.source
                ),
                list(new.values()),
            )
            made = {(row[0], row[1], row[2]) for row in inserted}
            new = {key: row for key, row in new.items() if key in made}
        if new:
            await _announce(session, services, now_ms, {key[0] for key in new}, new)
        whole = [scan for scan in scans if _first_read(scan) == scan.from_block]
        covered = [
            and_(
                PaymentScan.invoice_id == scan.invoice_id,
                PaymentScan.from_block >= scan.from_block,
                PaymentScan.to_block <= scan.to_block,
            )
            for scan in whole
        ]
        if covered:
            await session.execute(delete(PaymentScan).where(or_(*covered)))
        for scan in scans:
            if scan not in whole:
                await session.execute(
                    update(PaymentScan)
                    .where(
                        PaymentScan.invoice_id == scan.invoice_id,
                        PaymentScan.from_block == scan.from_block,
                        PaymentScan.to_block == scan.to_block,
                    )
                    .values(to_block=_first_read(scan) - 1)
                )
        read = {scan.invoice_id: scan.to_block for scan in scans}
        await release_paid_webhooks(session, read, now_ms)
    return len(new)


def _row(
    invoice_id: str,
    chain_id: int,
    token_of: dict[str, str | None],
    t: Transfer,
    times: dict[int, int],
    now_ms: int,
) -> dict[str, object]:
    return {
        "invoice_id": invoice_id,
        "tx_hash": t.tx_hash,
        "source": t.source,
        "chain_id": chain_id,
        "from_address": t.sender,
        "token_address": token_of[invoice_id],
        "amount_raw": str(t.amount_raw),
        "block_number": t.block_number,
        "block_hash": t.block_hash,
        "block_time": times[t.block_number],
        "final": False,
        "created_at": now_ms,
    }


async def _announce(
    session: AsyncSession,
    services: Services,
    now_ms: int,
    invoice_ids: set[str],
    new: dict[tuple[str, str, str], dict[str, object]],
) -> None:
    """Flag the invoices as having extras and write ``invoice.payment_recorded`` with the
    records just made (``data.payments``)."""
    await session.execute(
        update(Invoice).where(Invoice.id.in_(invoice_ids)).values(has_extras=True)
    )
    invoices = await session.scalars(
        select(Invoice).where(Invoice.id.in_(invoice_ids)).order_by(Invoice.id)
    )
    made: dict[str, list[PaymentRecord]] = defaultdict(list)
    for (invoice_id, _, _), row in new.items():
        made[invoice_id].append(PaymentRecord(**row))
    occurrences = []
    for invoice in invoices:
        mine = sorted(made[invoice.id], key=lambda r: (r.block_number, r.tx_hash, r.source))
        extra = {"payments": [payment_view(record) for record in mine]}
        occurrences.append(Occurrence(invoice, [InvoiceEvent.PAYMENT_RECORDED], extra=extra))
    await record_events(session, services.settings, now_ms, occurrences)


async def _recheck(services: Services, chain: ChainGateway, head: int) -> int:
    """Check the blocks of records not yet final; delete the records of blocks a reorg
    removed (and scan their escrows again); mark deep ones final. Returns records removed."""
    chain_id = chain.config.chain_id
    async with services.db.sessions() as session:
        blocks = list(
            await session.execute(
                select(PaymentRecord.block_number, PaymentRecord.block_hash)
                .where(PaymentRecord.chain_id == chain_id, PaymentRecord.final.is_(False))
                .distinct()
            )
        )
    if not blocks:
        return 0
    stale, final = [], []
    for number, block_hash in blocks:
        if await chain.block_hash(number) != block_hash:
            stale.append((number, block_hash))
        elif head - number >= FINAL_BLOCKS + chain.config.confirmations - 1:
            final.append((number, block_hash))
    removed = 0
    async with services.db.transaction() as session:
        for number, block_hash in final:
            await session.execute(
                update(PaymentRecord).where(*_at(chain_id, number, block_hash)).values(final=True)
            )
        for number, block_hash in stale:
            gone = list(
                await session.scalars(
                    delete(PaymentRecord)
                    .where(*_at(chain_id, number, block_hash))
                    .returning(PaymentRecord.invoice_id)
                )
            )
            removed += len(gone)
            scans = [scan_of(i, chain_id, number - 1, head, None) for i in sorted(set(gone))]
            await queue_scans(session, services.db.dialect, scans)
    if removed:
        log.info("%d payment record(s) on chain %s removed by a reorg", removed, chain_id)
    return removed


def _at(chain_id: int, number: int, block_hash: str) -> tuple[ColumnElement[bool], ...]:
    return (
        PaymentRecord.chain_id == chain_id,
        PaymentRecord.block_number == number,
        PaymentRecord.block_hash == block_hash,
    )
