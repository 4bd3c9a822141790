"""What a period's charge comes to (docs/integration/subscriptions.md#charges): confirmed
(the contract's bitmap has it: ``subscription.charged``, the failed periods in a row back
to 0, a past-due subscription active again), or failed on chain (reverted or dropped: the
period is the next to charge again, tried within its grace window like a refused one).
Each is applied in the database transaction of what tells it: the relayer transaction
becoming final, or the worker reading the bitmap."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.payments.seam import settle_authorization
from invoicing.payments.subscriptions.models import (
    ChargeStatus,
    Subscription,
    SubscriptionCharge,
    SubscriptionEvent,
    SubscriptionStatus,
)
from invoicing.payments.subscriptions.service import FINAL, record_event
from invoicing.services import Services
from invoicing.settlement.finality import Final
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import TxStatus


async def settle_charge(session: AsyncSession, services: Services, final: Final[None]) -> None:
    """A charge's relayer transaction is final. The payment itself is the monitor's to see,
    as any payment into the period's escrow."""
    await settle_authorization(session, final)
    charge = await session.scalar(
        select(SubscriptionCharge).where(SubscriptionCharge.tx_hash == final.row.tx_hash)
    )
    if charge is None:
        return
    sub = await session.get(Subscription, charge.subscription_pk, with_for_update=True)
    assert sub is not None
    await session.refresh(charge)
    if final.row.status == TxStatus.CONFIRMED:
        await confirmed(session, services, sub, charge, final.now_ms)
        return
    if charge.status == ChargeStatus.CONFIRMED:
        return  # a later transaction of the same period was charged
    charge.status, charge.updated_at = ChargeStatus.REVERTED, final.now_ms
    if sub.status not in FINAL and sub.next_period > charge.period:
        sub.next_period, sub.retry_at, sub.updated_at = charge.period, None, final.now_ms


async def confirmed(
    session: AsyncSession,
    services: Services,
    sub: Subscription,
    charge: SubscriptionCharge,
    now_ms: int,
) -> None:
    """``charge``'s period is charged on chain (``sub`` locked by the caller): once per
    period, its event, and the subscription no longer behind."""
    if charge.status == ChargeStatus.CONFIRMED:
        return
    charge.status, charge.updated_at = ChargeStatus.CONFIRMED, now_ms
    if sub.status not in FINAL:
        sub.failed_periods, sub.updated_at = 0, now_ms
        if sub.status == SubscriptionStatus.PAST_DUE:
            sub.status = SubscriptionStatus.ACTIVE
    extra = {"period": charge.period, "paymentAddress": charge.payment_address}
    await record_event(session, services, sub, SubscriptionEvent.CHARGED, extra)


async def paid_by_hand(services: Services, pk: str) -> None:
    """A past-due subscription whose every failed period's invoice the payer paid by hand
    (on its payment page) is active again."""
    paid = (InvoiceStatus.PAID, InvoiceStatus.COMPLETED)
    async with services.db.transaction() as session:
        sub = await session.get(Subscription, pk, with_for_update=True)
        assert sub is not None
        if sub.status != SubscriptionStatus.PAST_DUE:
            return
        unpaid = await session.scalar(
            select(func.count())
            .select_from(SubscriptionCharge)
            .join(Invoice, Invoice.id == SubscriptionCharge.invoice_pk)
            .where(
                SubscriptionCharge.subscription_pk == pk,
                SubscriptionCharge.status == ChargeStatus.FAILED,
                Invoice.status.not_in(paid),
            )
        )
        if unpaid:
            return
        sub.status, sub.failed_periods = SubscriptionStatus.ACTIVE, 0
        sub.updated_at = services.clock.now_ms()
