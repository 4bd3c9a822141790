"""Balance checks shared by the background monitor and the status lookup's live re-check."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.models import Invoice, InvoiceStatus
from invoicing.services import Services


async def confirmed_block(chain: ChainGateway) -> int:
    """The newest block at the chain's confirmation depth (1 = the head itself)."""
    head = await chain.block_number()
    return max(0, head - (chain.config.confirmations - 1))


async def read_balances(chain: ChainGateway, invoices: list[Invoice], block: int) -> dict[str, int]:
    """Balances by invoice id, one batched read per token, all at ``block``."""
    by_token: dict[str | None, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        by_token[invoice.token_address].append(invoice)
    balances: dict[str, int] = {}
    for token, group in by_token.items():
        values = await chain.balances(token, [i.payment_address for i in group], block)
        balances.update({invoice.id: value for invoice, value in zip(group, values, strict=True)})
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
