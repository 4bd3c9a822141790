"""Balance checks shared by the background monitor and the status lookup's live re-check."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.models import Invoice, InvoiceStatus
from invoicing.services import Services

# Balance reads of one pass run a few eth_calls at a time (all pinned to the same block).
PARALLEL_READS = 4


class Watched(Protocol):
    """What a balance read needs to know about an invoice (an ORM row or a plain row)."""

    @property
    def id(self) -> str: ...

    @property
    def payment_address(self) -> str: ...

    @property
    def token_address(self) -> str | None: ...


async def confirmed_block(chain: ChainGateway) -> int:
    """The newest block at the chain's confirmation depth (1 = the head itself)."""
    return confirmed_at(chain, await chain.block_number())


def confirmed_at(chain: ChainGateway, head: int) -> int:
    return max(0, head - (chain.config.confirmations - 1))


async def read_balances(
    chain: ChainGateway, invoices: Sequence[Watched], block: int, batch_size: int = 6000
) -> dict[str, int]:
    """Balances by invoice id, read at ``block``: one ``balancesOf`` call per token and chunk
    of ``batch_size`` addresses (eth_call gas is capped, so a chunk stays in the thousands)."""
    by_token: dict[str | None, list[Watched]] = defaultdict(list)
    for invoice in invoices:
        by_token[invoice.token_address].append(invoice)
    chunks = [
        (token, group[start : start + batch_size])
        for token, group in by_token.items()
        for start in range(0, len(group), batch_size)
    ]
    gate = asyncio.Semaphore(PARALLEL_READS)

    async def read(token: str | None, chunk: list[Watched]) -> dict[str, int]:
        async with gate:
            values = await chain.balances(token, [i.payment_address for i in chunk], block)
        return {invoice.id: value for invoice, value in zip(chunk, values, strict=True)}

    balances: dict[str, int] = {}
    for part in await asyncio.gather(*(read(token, chunk) for token, chunk in chunks)):
        balances.update(part)
    return balances


def apply_balance(invoice: Invoice, balance_raw: int, now_ms: int) -> bool:
    """Record a balance reading; returns True when this reading makes the invoice paid."""
    invoice.last_checked_at = now_ms
    changed = str(balance_raw) != invoice.balance_raw
    if invoice.status in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED) and not invoice.paid:
        invoice.balance_raw = str(balance_raw)
        if balance_raw >= int(invoice.required_raw) and invoice.deleted_at is None:
            invoice.status = InvoiceStatus.PAID
            invoice.paid = True
            invoice.paid_at = now_ms
            invoice.updated_at = now_ms
            return True
        if invoice.status == InvoiceStatus.PENDING and now_ms >= invoice.expires_at:
            invoice.status = InvoiceStatus.EXPIRED
            invoice.updated_at = now_ms
        elif changed:
            invoice.updated_at = now_ms
    elif invoice.status == InvoiceStatus.CANCELLED and changed:
        invoice.balance_raw = str(balance_raw)
        invoice.updated_at = now_ms
    return False


async def on_paid(session: AsyncSession, services: Services, invoice: Invoice) -> None:
    """Side effects of the paid transition, in the same transaction (the webhook outbox)."""
    from invoicing.webhooks.outbox import enqueue_paid_event

    # A paid invoice needs no more balance reads; the withdrawal worker takes it from here.
    invoice.watch = False
    await enqueue_paid_event(session, services, invoice)


async def store_balances(
    services: Services, invoice_ids: list[str], balances: dict[str, int]
) -> list[Invoice]:
    """Apply readings under row locks (a concurrent checker cannot double-fire a webhook)."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        rows = await session.scalars(
            select(Invoice)
            .where(Invoice.id.in_(invoice_ids))
            .order_by(Invoice.id)
            .with_for_update()
        )
        invoices = list(rows)
        for invoice in invoices:
            if apply_balance(invoice, balances[invoice.id], now_ms):
                await on_paid(session, services, invoice)
    return invoices


async def recheck_invoice(services: Services, invoice: Invoice) -> Invoice:
    """Live re-check of one escrow for the status lookup."""
    if invoice.status not in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED):
        return invoice
    chain = services.chains.get(invoice.chain_id)
    block = await confirmed_block(chain)
    balances = await read_balances(chain, [invoice], block)
    (updated,) = await store_balances(services, [invoice.id], balances)
    return updated
