"""Balance checks shared by the background monitor and the status lookup's live re-check.

A reading is ``int | None``: None means the escrow's token balance is unreadable (the token's
``balanceOf`` failed or misbehaved, see the factory's ``balancesOf``). An unreadable reading is
unknown for that invoice alone: it changes nothing (no status, no balance, no webhook, no
``lastCheckedAt``) and never fails the pass or the re-check of the other invoices.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select

from invoicing import metrics
from invoicing.chain.answers import RpcError
from invoicing.chain.gateway import ChainGateway
from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal
from invoicing.errors import ChainUnavailable, NotFound
from invoicing.invoices.lifecycle import (
    Effect,
    apply_step,
    awaits_payment,
    on_reading,
    reading_changes,
)
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.payments import queue_scans, scan_of
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow, InvoiceState

log = logging.getLogger(__name__)

# Balance reads of one pass run a few eth_calls at a time (all pinned to the same block).
PARALLEL_READS = 4
# Live re-checks served by one chain read at most (one EscrowReader call reads thousands).
RECHECK_BATCH = 1000


async def confirmed_block(chain: ChainGateway) -> int:
    """The newest block at the chain's confirmation depth (1 = the head itself)."""
    return confirmed_at(chain, await chain.block_number())


def confirmed_at(chain: ChainGateway, head: int) -> int:
    return max(0, head - (chain.config.confirmations - 1))


async def read_balances(
    chain: ChainGateway, invoices: Sequence[InvoiceState], block: int, batch_size: int = 9000
) -> dict[str, int | None]:
    """Balances by invoice id (None = unreadable), read at ``block``: every asset of a chunk
    of ``batch_size`` invoices in one read (``ChainGateway.read_escrows``: an EscrowReader
    call, split further when its gas would not fit one ``eth_call``)."""
    gate = asyncio.Semaphore(PARALLEL_READS)

    async def read(chunk: Sequence[InvoiceState]) -> dict[str, int | None]:
        members, groups = _by_asset(chunk)
        async with gate:
            values = await chain.read_escrows(groups, block)
        return _by_invoice(members, values)

    chunks = [invoices[i : i + batch_size] for i in range(0, len(invoices), batch_size)]
    parts = await asyncio.gather(*(read(chunk) for chunk in chunks))
    return {key: value for part in parts for key, value in part.items()}


async def read_head_balances(
    chain: ChainGateway, invoices: Sequence[InvoiceState]
) -> tuple[int, dict[str, int | None]]:
    """The head and the balances there by invoice id (None = unreadable), in one call when
    the reader answers them all (``ChainGateway.read_escrows_at_head``)."""
    members, groups = _by_asset(invoices)
    block, values = await chain.read_escrows_at_head(groups)
    return block, _by_invoice(members, values)


def _by_asset(
    invoices: Sequence[InvoiceState],
) -> tuple[list[list[InvoiceState]], list[tuple[str | None, list[str]]]]:
    """``invoices`` by asset, and the (token, escrow addresses) groups to read for them."""
    by_token: dict[str | None, list[InvoiceState]] = defaultdict(list)
    for invoice in invoices:
        by_token[invoice.token_address].append(invoice)
    groups = [(token, [i.payment_address for i in group]) for token, group in by_token.items()]
    return list(by_token.values()), groups


def _by_invoice(
    members: list[list[InvoiceState]], values: Sequence[Sequence[int | None]]
) -> dict[str, int | None]:
    return {
        invoice.id: value
        for group, group_values in zip(members, values, strict=True)
        for invoice, value in zip(group, group_values, strict=True)
    }


@dataclass(frozen=True)
class Stored:
    """What :func:`store_balances` left: every invoice with a readable reading, as it now
    stands (written, or kept because a later block's reading is already stored), and those
    this call marked paid."""

    rows: list[Invoice]
    newly_paid: list[Invoice]


async def store_balances(
    services: Services,
    invoice_ids: list[str],
    balances: Mapping[str, int | None],
    block: int,
    paid_from_block: int | None = None,
    first_unread: int | None = None,
) -> Stored:
    """Apply readings made at ``block`` under row locks (a concurrent checker cannot
    double-fire a webhook); the lifecycle decides on each row as locked, and the moves'
    events and paid webhooks join the transaction.
    An invoice whose reading is unreadable (None) is left as it is and not returned; one
    whose stored balance was read at a later block is left as it is (a worker that paused
    between its read and this write never moves a balance back) and returned as it stands.
    ``paid_from_block``: the first block a payment found now can be in (the detection lag
    of each invoice marked paid is measured from its timestamp). Each changed balance queues
    a scan for its transfers (``invoices.payments``; ``first_unread``: the first block the
    pass that read it had not read, when known), recorded later by ``monitor.records``; the
    paid webhook of an invoice marked paid with its scan waits for that step, which sends it
    with the invoice's ``payments``."""
    now_ms = services.clock.now_ms()
    newly_paid: list[Invoice] = []
    async with services.db.transaction() as session:
        rows = await session.scalars(
            select(Invoice)
            .where(Invoice.id.in_(invoice_ids))
            .order_by(Invoice.id)
            .with_for_update()
        )
        stored = []
        occurred = []
        scans = []
        for invoice in rows:
            balance_raw = balances[invoice.id]
            if balance_raw is None:
                continue
            stored.append(invoice)
            if invoice.balance_block > block:
                continue
            scanned = balance_raw != int(invoice.balance_raw)
            if scanned:
                scan = scan_of(
                    invoice.id, invoice.chain_id, invoice.balance_block, block, first_unread
                )
                scans.append(scan)
            deleted = invoice.deleted_at is not None
            step = on_reading(invoice, balance_raw, now_ms, deleted=deleted)
            invoice.last_checked_at = now_ms
            invoice.balance_block = block
            invoice.unreadable = False
            events = apply_step(invoice, step, now_ms, balance_raw)
            notify = Effect.NOTIFY_PAID in step.effects
            if events or notify:
                held = notify and scanned  # until the scan's transfers are recorded
                occurred.append(Occurrence(invoice, events, notify_paid=notify, hold_paid=held))
            if Effect.MARK_PAID in step.effects:
                newly_paid.append(invoice)
        await record_events(session, services.settings, now_ms, occurred)
        await queue_scans(session, services.db.dialect, scans)
    if newly_paid and paid_from_block is not None:
        await observe_detection(services, newly_paid[0].chain_id, paid_from_block, newly_paid)
    return Stored(stored, newly_paid)


async def observe_detection(
    services: Services, chain_id: int, block: int, paid: Sequence[Invoice]
) -> None:
    """Detection lag of invoices just marked paid: from ``block``'s timestamp to each one's
    ``paid_at``. One header read; when it fails the lag goes unmeasured (the payment is
    recorded)."""
    try:
        timestamp_s = await services.chains.get(chain_id).block_timestamp(block)
    except (ChainUnavailable, RpcError) as exc:
        log.info("detection lag of %d payment(s) not measured: %s", len(paid), exc)
        return
    for invoice in paid:
        metrics.payment_detected((invoice.paid_at or 0) / 1000 - timestamp_s)


async def recheck_invoice(
    services: Services, invoice: Invoice | InvoiceRow
) -> Invoice | InvoiceRow:
    """Live re-check of one escrow for the status lookup.

    Concurrent re-checks on one chain share one read (see ``_recheck_batch``); a call always
    waits for a read that starts after it, never for one already in flight, so a payment mined
    before the call is seen. Only paid and expired transitions and balance changes are
    written; otherwise the answer just carries the time of this check as ``lastCheckedAt``
    (like the monitor's block pass, which stores only readings that change something).
    """
    if not awaits_payment(invoice):
        return invoice
    chain = services.chains.get(invoice.chain_id)
    recheck = _Recheck(services, chain, invoice)
    return await _rechecker(services.db, invoice.chain_id).submit(recheck)


@dataclass(frozen=True)
class _Recheck:
    services: Services
    chain: ChainGateway
    invoice: Invoice | InvoiceRow


_Answer = Invoice | InvoiceRow


# This process's re-check coalescers, by chain id.
_RECHECKERS: ProcessLocal[dict[int, Coalescer[_Recheck, _Answer]]] = ProcessLocal(lambda _db: {})


def _rechecker(db: Database, chain_id: int) -> Coalescer[_Recheck, _Answer]:
    """One coalescer per chain (items carry the services)."""
    recheckers = _RECHECKERS.of(db)
    rechecker = recheckers.get(chain_id)
    if rechecker is None:
        rechecker = recheckers[chain_id] = Coalescer(_recheck_batch, max_batch=RECHECK_BATCH)
    return rechecker


async def _recheck_batch(batch: Sequence[_Recheck]) -> list[_Answer | Exception]:
    """One head read and one balance read of every asset (``read_balances``; both in one
    call where one confirmation suffices) for every re-check of the batch (an invoice asked
    for twice is read once); the readings that change an invoice are stored in one
    transaction, under row locks, with the paid events."""
    services, chain = batch[0].services, batch[0].chain
    invoices = list({item.invoice.id: item.invoice for item in batch}.values())
    if chain.config.confirmations == 1:
        # The head is confirmed: the balances are read with it, in one call.
        block, balances = await read_head_balances(chain, invoices)
    else:
        block = await confirmed_block(chain)
        balances = await read_balances(chain, invoices, block)
    now_ms = services.clock.now_ms()
    changed = {
        item.invoice.id
        for item in batch
        if (reading := balances[item.invoice.id]) is not None
        and reading_changes(item.invoice, reading, now_ms)
    }
    unreadable = {invoice.id for invoice in invoices if balances[invoice.id] is None}
    stored: dict[str, Invoice] = {}
    if changed:
        written = await store_balances(services, sorted(changed), balances, block, block)
        stored = {row.id: row for row in written.rows}
    return [_answer(item.invoice, changed, unreadable, stored, now_ms) for item in batch]


def _answer(
    invoice: Invoice | InvoiceRow,
    changed: set[str],
    unreadable: set[str],
    stored: dict[str, Invoice],
    now_ms: int,
) -> _Answer | Exception:
    """The stored row where the reading was written; the invoice as it is where its balance
    is unreadable (unknown: nothing was checked); otherwise a copy of the asked invoice (which
    other lookups may share, so it is left as it was) checked now."""
    if invoice.id in unreadable:
        return invoice
    if invoice.id not in changed:
        checked = InvoiceRow.copy_of(invoice)
        checked.last_checked_at = now_ms
        return checked
    if invoice.id in stored:
        return stored[invoice.id]
    return NotFound("no invoice with this paymentAddress")
