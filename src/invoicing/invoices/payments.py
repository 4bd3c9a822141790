"""Payments of record: every transfer that reached an invoice's escrow, as the chain shows it.

The balance decides whether an invoice is paid (``invoices.lifecycle``); these rows are what
people read: who paid, in which transaction, how much. The monitor queues a scan of an
escrow whose balance it saw change (``PaymentScan``: the blocks the change lies in) in the
transaction that stores the reading, and a step of its own (``monitor.records``) reads the
transfers later, so recording never delays marking paid. A record keeps its block's hash:
while the block is not yet ``final`` the step checks the hash again, and a reorg that
removed the block removes the record (the escrow is scanned again).

The paid webhook carries the invoice's ``payments`` as the status lookup shows them: the
transaction that marks an invoice paid and queues its scan writes the webhook held
(``PAID_WEBHOOK_HOLD_MS``), and the step that records the scan's transfers releases it, due
at once, with the records (``release_paid_webhooks``). The monitor starts the step right
after a pass that changed something, so the hold costs the paid webhook those few reads;
only when they fail does the hold run out and the webhook go without the payments not
recorded yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import upsert
from invoicing.notifications.outbox import ring_after_commit
from invoicing.tables.notifications import EventStatus, WebhookEvent
from invoicing.tables.records import PaymentRecord, PaymentScan

# How long a paid webhook waits for its invoice's payments of record at most.
PAID_WEBHOOK_HOLD_MS = 60_000


async def payments_in(
    session: AsyncSession, invoice_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """The ``payments`` of each invoice that has some, in chain order, by invoice id."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rows = await session.scalars(
        select(PaymentRecord)
        .where(PaymentRecord.invoice_id.in_(list(invoice_ids)))
        .order_by(PaymentRecord.block_number, PaymentRecord.tx_hash, PaymentRecord.source)
    )
    for record in rows:
        found[record.invoice_id].append(payment_view(record))
    return found


def payment_view(record: PaymentRecord) -> dict[str, Any]:
    """One payment of record as the owner's view lists it."""
    return {
        "txHash": record.tx_hash,
        "from": record.from_address,
        "amountRaw": record.amount_raw,
        "tokenAddress": record.token_address,
        "blockNumber": record.block_number,
    }


# Blocks searched back from a change whose start is unknown (an escrow never read with funds
# by a block pass that ran the block before: the first pass after a start, a due pass, a
# live re-check).
UNKNOWN_START_BLOCKS = 64


def scan_of(
    invoice_id: str, chain_id: int, last_block: int, block: int, first_unread: int | None
) -> dict[str, Any]:
    """The scan of a balance change seen at ``block``: from the block after the previous
    stored reading (``last_block``; 0 = none), else from ``first_unread`` (the first block
    the pass that saw it had not read), else ``UNKNOWN_START_BLOCKS`` back."""
    if last_block:
        start = last_block + 1
    elif first_unread is not None:
        start = first_unread
    else:
        start = block - UNKNOWN_START_BLOCKS
    start = max(0, min(start, block))
    return {"invoice_id": invoice_id, "chain_id": chain_id, "from_block": start, "to_block": block}


async def queue_scans(session: AsyncSession, dialect: str, scans: Sequence[dict[str, Any]]) -> None:
    """Queue ``scans`` (``scan_of``) in the caller's transaction; a scan already queued for an
    invoice is widened to cover both."""
    if not scans:
        return
    insert = upsert(dialect, PaymentScan)
    await session.execute(
        insert.on_conflict_do_update(
            index_elements=[PaymentScan.invoice_id],
            set_={
                "from_block": func.min(PaymentScan.from_block, insert.excluded.from_block)
                if dialect == "sqlite"
                else func.least(PaymentScan.from_block, insert.excluded.from_block),
                "to_block": func.max(PaymentScan.to_block, insert.excluded.to_block)
                if dialect == "sqlite"
                else func.greatest(PaymentScan.to_block, insert.excluded.to_block),
            },
        ),
        list(scans),
    )


async def release_paid_webhooks(
    session: AsyncSession, read_to: Mapping[str, int], now_ms: int
) -> int:
    """Make the held paid webhooks of the invoices of ``read_to`` (invoice id → the newest
    block of its escrow just searched for transfers) due now, each with its invoice's
    ``payments`` (as the invoice object lists them: absent when there are none), in the
    caller's transaction; an invoice whose scan was widened meanwhile by a newer change
    (its queued scan reaches past the block read) keeps its webhook held. Returns the
    webhooks released."""
    if not read_to:
        return 0
    queued = await session.execute(
        select(PaymentScan.invoice_id, PaymentScan.to_block).where(
            PaymentScan.invoice_id.in_(list(read_to))
        )
    )
    waiting = {invoice_id for invoice_id, to_block in queued if to_block > read_to[invoice_id]}
    ready = sorted(set(read_to) - waiting)
    if not ready:
        return 0
    held = [
        row
        for row in await session.scalars(
            select(WebhookEvent)
            .where(
                WebhookEvent.invoice_pk.in_(ready),
                WebhookEvent.endpoint_id.is_(None),
                WebhookEvent.status == EventStatus.PENDING,
                WebhookEvent.attempts == 0,
                WebhookEvent.next_attempt_at > now_ms,
            )
            .order_by(WebhookEvent.id)
            .with_for_update()
        )
        if row.payload.get("status") == "paid" and "payments" not in row.payload
    ]
    if not held:
        return 0
    payments = await payments_in(
        session, sorted({row.invoice_pk for row in held if row.invoice_pk})
    )
    for row in held:
        mine = payments.get(row.invoice_pk or "")
        row.payload = {**row.payload, **({"payments": mine} if mine else {})}
        row.next_attempt_at = row.created_at  # due since it was written: its turn kept
    ring_after_commit(session)
    return len(held)
