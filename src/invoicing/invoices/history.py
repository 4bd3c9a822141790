"""Everything that happened to one invoice, for its owner's detail page: its events, the
sweeps and refunds of its escrow with their transactions, other assets found in it, and the
webhook deliveries about it with every attempt.

It reads the withdrawals and relayer transactions tables from the tables layer
(``tables.settlement``), as ``invoices.owner_view`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from invoicing.db import Database
from invoicing.errors import NotFound
from invoicing.invoices.owner_view import other_balances_in, refunds_in
from invoicing.invoices.payments import payments_in
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event, WebhookAttempt, WebhookEvent
from invoicing.tables.settlement import RelayerTransaction, Withdrawal, WithdrawalItem

MAX_ROWS = 200


@dataclass(frozen=True)
class Sweep:
    tx_hash: str
    status: str
    amount_raw: str
    moved_raw: str | None
    created_at: int


@dataclass
class Delivery:
    delivery: WebhookEvent
    attempts: list[WebhookAttempt] = field(default_factory=list)


@dataclass
class History:
    invoice: Invoice
    events: Sequence[Event] = ()
    sweeps: list[Sweep] = field(default_factory=list)
    payments: list[dict[str, Any]] = field(default_factory=list)
    refunds: list[dict[str, Any]] = field(default_factory=list)
    other_balances: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


async def invoice_history(db: Database, owner_key: str, invoice_pk: str) -> History:
    """The history of the owner's invoice ``invoice_pk`` (404 when it is not theirs)."""
    async with db.sessions() as session:
        invoice = await session.scalar(
            select(Invoice).where(Invoice.id == invoice_pk, Invoice.owner_key == owner_key)
        )
        if invoice is None:
            raise NotFound("no such invoice for this owner")
        found = History(invoice)
        found.events = (
            await session.scalars(
                select(Event)
                .where(Event.owner_key == owner_key, Event.invoice_pk == invoice_pk)
                .order_by(Event.seq)
                .limit(MAX_ROWS)
            )
        ).all()
        sweeps = await session.execute(
            select(
                RelayerTransaction.tx_hash,
                Withdrawal.status,
                WithdrawalItem.amount_raw,
                WithdrawalItem.moved_raw,
                Withdrawal.created_at,
            )
            .join(Withdrawal, Withdrawal.id == WithdrawalItem.withdrawal_id)
            .join(RelayerTransaction, RelayerTransaction.id == Withdrawal.relayer_tx_id)
            .where(WithdrawalItem.invoice_id == invoice_pk)
            .order_by(Withdrawal.created_at)
        )
        found.sweeps = [Sweep(*row) for row in sweeps]
        if invoice.has_extras:
            found.payments = (await payments_in(session, [invoice_pk])).get(invoice_pk, [])
            found.refunds = (await refunds_in(session, [invoice_pk])).get(invoice_pk, [])
            found.other_balances = (await other_balances_in(session, [invoice_pk])).get(
                invoice_pk, []
            )
        deliveries = (
            await session.scalars(
                select(WebhookEvent)
                .where(WebhookEvent.invoice_pk == invoice_pk, WebhookEvent.owner_key == owner_key)
                .order_by(WebhookEvent.created_at, WebhookEvent.id)
                .limit(MAX_ROWS)
            )
        ).all()
        by_id = {row.id: Delivery(row) for row in deliveries}
        if by_id:
            attempts = await session.scalars(
                select(WebhookAttempt)
                .where(WebhookAttempt.event_id.in_(list(by_id)))
                .order_by(WebhookAttempt.event_id, WebhookAttempt.attempt)
            )
            for attempt in attempts:
                by_id[attempt.event_id].attempts.append(attempt)
        found.deliveries = list(by_id.values())
    return found
