"""Subscriptions (docs/integration/subscriptions.md): an owner offers one, a payer signs it
once and gives the Subscriptions contract an allowance, and each period is charged into
that period's invoice, through the payment seam (``payments.seam``).

    awaiting_authorization --authorize (period 0 charged)--> active
    active --a period's charge fails through the grace window--> past_due
    past_due --a later period charged--> active
    active | past_due --payer cancels on chain, owner cancels, too many failed periods--> cancelled
    active | past_due --maxPeriods periods charged or failed--> finished

Each period's charge creates an ordinary invoice (``invoices.create``) whose escrow is the
one the contract pays into, so the monitor, events and sweeps follow it as any invoice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.guard import Caller
from invoicing.chain.deploy import subscriptions_address
from invoicing.db import Database
from invoicing.errors import Conflict, InvalidRequest, NotFound
from invoicing.invoices.amounts import to_raw
from invoicing.invoices.create import allowed_token_decimals
from invoicing.invoices.insert import time_ordered_id
from invoicing.notifications.record import new_event, write_events
from invoicing.outbound.guard import webhook_url_problem
from invoicing.payments.subscriptions.models import (
    Subscription,
    SubscriptionCharge,
    SubscriptionEvent,
    SubscriptionStatus,
)
from invoicing.payments.subscriptions.terms import Terms
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice

DEV_MIN_PERIOD_S = 60


@dataclass(frozen=True)
class NewSubscription:
    """A validated create request (addresses checksummed)."""

    owner_address: str
    chain_id: int
    token_address: str
    amount: str
    period_seconds: int
    max_periods: int = 0
    subscription_ref: str | None = None
    description: str | None = None
    redirect_url: str | None = None
    cancel_url: str | None = None
    webhook_url: str | None = None


@dataclass(frozen=True)
class SubscriptionView:
    """A subscription with its charges, as its owner sees it."""

    subscription: Subscription
    charges: list[tuple[SubscriptionCharge, str, str | None]]  # (charge, invoice status, tx)

    @property
    def next_charge_at_ms(self) -> int | None:
        sub = self.subscription
        if sub.status not in (SubscriptionStatus.ACTIVE, SubscriptionStatus.PAST_DUE):
            return None
        return terms_of(sub).due_at(sub.next_period) * 1000


def terms_of(sub: Subscription) -> Terms:
    return Terms(
        chain_id=sub.chain_id,
        contract=subscriptions_address(),
        owner=sub.owner_address,
        token=sub.token_address,
        amount_raw=int(sub.amount_raw),
        period_seconds=sub.period_seconds,
        start_s=sub.start_s,
        max_periods=sub.max_periods,
        salt=bytes.fromhex(sub.salt[2:]),
    )


def min_period_s(services: Services) -> int:
    settings = services.settings
    if settings.environment == "development":
        return DEV_MIN_PERIOD_S
    return settings.subscription_min_period_s


def check_webhook_url(settings: Settings, url: str | None) -> None:
    """The rules of an invoice's ``webhookUrl`` (``api.invoices.create_rules``): https outside
    development unless plain http is allowed, and no private address unless allowed."""
    if url is None:
        return
    problem = webhook_url_problem(
        url,
        require_https=settings.environment != "development" and not settings.webhook_allow_http,
        allow_private=settings.webhook_allow_private,
    )
    if problem is not None:
        raise InvalidRequest(f"webhookUrl: {problem}", {"field": "webhookUrl"})


async def create_subscription(
    services: Services, request: NewSubscription, caller: Caller
) -> tuple[Subscription, bool]:
    """Create a subscription awaiting its payer's signature; an identical retry (same
    ``subscriptionId``) answers the first, another with that reference is 409. ``caller``'s
    credential is kept for each period's invoice, whose paid webhook repeats it."""
    check_webhook_url(services.settings, request.webhook_url)
    chain = services.chains.get(request.chain_id)
    decimals = allowed_token_decimals(chain, request.token_address)
    amount_raw = to_raw(request.amount, decimals)
    least = min_period_s(services)
    if request.period_seconds < least:
        raise InvalidRequest(
            f"periodSeconds must be at least {least}", {"field": "periodSeconds", "min": least}
        )
    earlier = await _by_ref(services.db, request)
    if earlier is not None:
        return earlier, False
    start_s = await chain.block_timestamp(await chain.block_number())
    now_ms = services.clock.now_ms()
    row = Subscription(
        id=time_ordered_id(now_ms),
        owner_address=request.owner_address,
        owner_key=request.owner_address.lower(),
        subscription_ref=request.subscription_ref,
        chain_id=request.chain_id,
        token_address=request.token_address,
        decimals=decimals,
        amount=request.amount,
        amount_raw=str(amount_raw),
        period_seconds=request.period_seconds,
        start_s=start_s,
        max_periods=request.max_periods,
        salt="0x" + os.urandom(32).hex(),
        description=request.description,
        redirect_url=request.redirect_url,
        cancel_url=request.cancel_url,
        webhook_url=request.webhook_url,
        auth_mode=caller.mode,
        api_key_id=caller.api_key_id,
        auth_signature=caller.signature,
        auth_timestamp=caller.timestamp,
        status=SubscriptionStatus.AWAITING_AUTHORIZATION,
        next_period=0,
        failed_periods=0,
        created_at=now_ms,
        updated_at=now_ms,
    )
    async with services.db.transaction() as session:
        session.add(row)
    return row, True


async def _by_ref(db: Database, request: NewSubscription) -> Subscription | None:
    if request.subscription_ref is None:
        return None
    async with db.sessions() as session:
        row = await session.scalar(
            select(Subscription).where(
                Subscription.owner_key == request.owner_address.lower(),
                Subscription.subscription_ref == request.subscription_ref,
            )
        )
    if row is None:
        return None
    same = (
        row.chain_id == request.chain_id
        and row.token_address == request.token_address
        and row.amount == request.amount
        and row.period_seconds == request.period_seconds
        and row.max_periods == request.max_periods
        and row.webhook_url == request.webhook_url
    )
    if not same:
        raise Conflict(
            "a subscription with this subscriptionId exists with different fields",
            {"field": "subscriptionId", "id": row.id},
        )
    return row


async def find_subscription(db: Database, subscription_pk: str) -> Subscription:
    async with db.sessions() as session:
        row = await session.get(Subscription, subscription_pk)
    if row is None:
        raise NotFound("no subscription with this id")
    return row


async def owned_subscription(db: Database, owner_key: str, subscription_pk: str) -> Subscription:
    row = await find_subscription(db, subscription_pk)
    if row.owner_key != owner_key:
        raise NotFound("no subscription with this id")
    return row


async def view_of(db: Database, sub: Subscription) -> SubscriptionView:
    from_invoices = await charges_of(db, [sub.id])
    return SubscriptionView(sub, from_invoices.get(sub.id, []))


async def charges_of(
    db: Database, pks: list[str]
) -> dict[str, list[tuple[SubscriptionCharge, str, str | None]]]:
    found: dict[str, list[tuple[SubscriptionCharge, str, str | None]]] = {}
    async with db.sessions() as session:
        rows = await session.execute(
            select(SubscriptionCharge, Invoice.status)
            .join(Invoice, Invoice.id == SubscriptionCharge.invoice_pk)
            .where(SubscriptionCharge.subscription_pk.in_(pks))
            .order_by(SubscriptionCharge.period)
        )
        for charge, status in rows:
            found.setdefault(charge.subscription_pk, []).append((charge, status, charge.tx_hash))
    return found


async def list_subscriptions(
    db: Database, owner_key: str, page: int, limit: int
) -> tuple[list[SubscriptionView], int]:
    async with db.sessions() as session:
        total = await session.scalar(
            select(func.count())
            .select_from(Subscription)
            .where(Subscription.owner_key == owner_key)
        )
        rows = list(
            await session.scalars(
                select(Subscription)
                .where(Subscription.owner_key == owner_key)
                .order_by(Subscription.created_at.desc(), Subscription.id.desc())
                .offset((page - 1) * limit)
                .limit(limit)
            )
        )
    charges = await charges_of(db, [row.id for row in rows])
    return [SubscriptionView(row, charges.get(row.id, [])) for row in rows], int(total or 0)


async def cancel_by_owner(services: Services, owner_key: str, subscription_pk: str) -> Subscription:
    """The owner's cancellation: nothing is charged for it any more (idempotent)."""
    sub = await owned_subscription(services.db, owner_key, subscription_pk)
    return await set_status(services, sub.id, SubscriptionStatus.CANCELLED, {"by": "owner"})


FINAL = (SubscriptionStatus.CANCELLED, SubscriptionStatus.FINISHED)
_EVENT_OF = {
    SubscriptionStatus.ACTIVE: SubscriptionEvent.ACTIVATED,
    SubscriptionStatus.PAST_DUE: SubscriptionEvent.PAST_DUE,
    SubscriptionStatus.CANCELLED: SubscriptionEvent.CANCELLED,
    SubscriptionStatus.FINISHED: SubscriptionEvent.FINISHED,
}


async def set_status(
    services: Services, subscription_pk: str, status: str, extra: dict[str, object]
) -> Subscription:
    """Move a subscription to ``status`` (a final one stays final) with its event, in one
    transaction under the row's lock."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        sub = await session.get(Subscription, subscription_pk, with_for_update=True)
        assert sub is not None
        if sub.status == status or sub.status in FINAL:
            return sub
        activated = sub.status == SubscriptionStatus.AWAITING_AUTHORIZATION
        sub.status = status
        sub.updated_at = now_ms
        if status == SubscriptionStatus.CANCELLED:
            sub.cancelled_at = now_ms
        if status != SubscriptionStatus.ACTIVE or activated:
            await record_event(session, services, sub, _EVENT_OF[SubscriptionStatus(status)], extra)
    return sub


async def record_event(
    session: AsyncSession,
    services: Services,
    sub: Subscription,
    kind: str,
    extra: dict[str, object],
) -> None:
    data = {"subscription": {"id": sub.id, "status": sub.status, **extra}}
    event = new_event(sub.owner_key, kind, services.clock.now_ms(), data)
    await write_events(session, services.settings, services.clock.now_ms(), [event])
