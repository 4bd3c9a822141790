"""Charging a subscription's periods: the payer's authorization (period 0 at once), and the
worker that charges each later period once the chain's latest block time reaches it
(docs/integration/subscriptions.md#charges). Every charge goes through the payment seam
(``payments.seam.relay_payment``) as a ``PeriodCharge``.

A charge the seam refuses (allowance or balance too low, the payer's failure limit) is
tried again after ``subscription_retry_s``; once the period has been due for
``subscription_grace_s`` it has failed: the subscription is ``past_due`` and the next
period is next. After ``subscription_max_failed_periods`` failed periods in a row the
subscription is cancelled. A cancellation on chain (by the payer) is read before each
charge.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import normalize_address
from invoicing.auth.guard import Caller
from invoicing.chain.gateway import ChainGateway
from invoicing.db import upsert
from invoicing.errors import (
    AuthorizationUsed,
    ChainUnavailable,
    InvalidAuthorization,
    InvalidOwnerSignature,
    InvoiceExists,
    ServiceError,
)
from invoicing.invoices.create import CreateRules, NewInvoice, create_invoice
from invoicing.invoices.views import SUBSCRIPTION_CALLER
from invoicing.payments.method import PaymentMethod
from invoicing.payments.seam import dry_run, relay_payment
from invoicing.payments.subscriptions.charge import PeriodCharge
from invoicing.payments.subscriptions.models import (
    ChargeStatus,
    Subscription,
    SubscriptionCharge,
    SubscriptionEvent,
    SubscriptionStatus,
)
from invoicing.payments.subscriptions.service import (
    FINAL,
    find_subscription,
    record_event,
    set_status,
    terms_of,
)
from invoicing.payments.subscriptions.settle import confirmed, paid_by_hand, settle_charge
from invoicing.payments.subscriptions.terms import Terms
from invoicing.services import Services
from invoicing.settlement.finality import OnFinal
from invoicing.settlement.signed_relay import SignedRequest, parse_signature, recover_signer
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import TxPurpose

log = logging.getLogger(__name__)
# What a relayed charge may take to be mined: the deadline the pipeline checks (the payer's
# signature itself has none).
CHARGE_DEADLINE_S = 3600


async def authorize(
    services: Services, subscription_pk: str, signature: str, payer: str | None
) -> Subscription:
    """The payer's signature of the subscription: period 0 is charged at once. The same
    authorization again charges nothing more; another one once authorized is 409."""
    sub = await find_subscription(services.db, subscription_pk)
    terms = terms_of(sub)
    payer = payer_of(terms, signature, payer)
    if sub.status != SubscriptionStatus.AWAITING_AUTHORIZATION:
        if sub.payer == payer and sub.signature == signature:
            return sub
        raise AuthorizationUsed(
            "this subscription is authorized already, or ended", {"status": sub.status}
        )
    chain = services.chains.get(sub.chain_id)
    if payer != _recovered(terms, signature) and not await chain.has_code(payer):
        raise InvalidAuthorization("the signature is not the payer's", {"field": "signature"})
    charge = _charge(services, sub, terms, payer, signature, 0)
    try:
        await dry_run(services, chain, charge)  # nothing is created for a refused one
    except InvalidOwnerSignature as exc:
        raise InvalidAuthorization(
            "the signature is not the payer's for this subscription", {"field": "signature"}
        ) from exc
    await _charge_invoice(services, chain, sub, terms, payer, 0)
    await relay_payment(services, chain, charge)
    await _activated(services, sub.id, payer, signature, terms)
    return await find_subscription(services.db, subscription_pk)


def _recovered(terms: Terms, signature: str) -> str | None:
    try:
        return recover_signer(terms.typed_data(), parse_signature(signature))
    except InvalidOwnerSignature:
        return None


def payer_of(terms: Terms, signature: str, payer: str | None) -> str:
    """The payer an EOA's signature names, or the contract wallet named with ``payer``."""
    recovered = _recovered(terms, signature)
    if payer is None:
        if recovered is None:
            raise InvalidAuthorization(
                "the signature names no payer: sign the typed data with the payer's key, or "
                "name the contract wallet with payer",
                {"field": "signature"},
            )
        return recovered
    payer = normalize_address(payer)
    if recovered is not None and recovered != payer:
        raise InvalidAuthorization("the signature is not payer's", {"field": "payer"})
    return payer


async def _activated(services: Services, pk: str, payer: str, signature: str, terms: Terms) -> None:
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        sub = await session.get(Subscription, pk, with_for_update=True)
        assert sub is not None
        if sub.status != SubscriptionStatus.AWAITING_AUTHORIZATION:
            return
        sub.payer, sub.signature = payer, signature
        sub.onchain_id = "0x" + terms.id_of(payer).hex()
        sub.status = SubscriptionStatus.ACTIVE
        sub.next_period, sub.updated_at = 1, now_ms
        await record_event(session, services, sub, SubscriptionEvent.ACTIVATED, {"payer": payer})


def _charge(
    services: Services, sub: Subscription, terms: Terms, payer: str, signature: str, period: int
) -> PeriodCharge:
    deadline = services.clock.now_ms() // 1000 + CHARGE_DEADLINE_S
    charge = PeriodCharge(
        SignedRequest(sub.chain_id, payer, 0, deadline, signature), terms, payer, period, sub.id
    )
    nonce = int.from_bytes(charge.salt, "big")
    request = SignedRequest(sub.chain_id, payer, nonce, deadline, signature)
    return PeriodCharge(request, terms, payer, period, sub.id)


async def _charge_invoice(
    services: Services,
    chain: ChainGateway,
    sub: Subscription,
    terms: Terms,
    payer: str,
    period: int,
) -> None:
    """The period's invoice and its charge row, created once."""
    async with services.db.sessions() as session:
        if await session.get(SubscriptionCharge, (sub.id, period)) is not None:
            return
    salt = _charge(services, sub, terms, payer, "0x", period).salt
    now_ms = services.clock.now_ms()
    settings = services.settings
    lifetime_ms = (settings.subscription_grace_s + settings.default_expiry_s) * 1000
    invoice_id = f"subscription:{sub.id}:{period}:{payer}"
    # Created before a crash (or by another worker) without its charge row: that one, as its
    # expiry (from the clock) makes a second create a conflict.
    found = await _period_invoice(services, sub, invoice_id)
    if found is None:
        try:
            invoice, _ = await create_invoice(
                services.db,
                chain,
                NewInvoice(
                    owner_address=sub.owner_address,
                    chain_id=sub.chain_id,
                    amount=sub.amount,
                    invoice_id=invoice_id,
                    token_address=sub.token_address,
                    description=sub.description,
                    expires_at=now_ms + lifetime_ms,
                    metadata={"subscription": {"id": sub.id, "period": period}},
                    salt=salt,
                    webhook_url=sub.webhook_url,
                ),
                # The subscription's creation credential: the paid webhook repeats it.
                Caller(
                    sub.owner_key,
                    SUBSCRIPTION_CALLER,
                    api_key_id=sub.api_key_id,
                    signature=sub.auth_signature,
                    timestamp=sub.auth_timestamp,
                ),
                now_ms,
                settings.default_expiry_s,
                CreateRules(late_payment_window_s=settings.late_payment_window_s),
            )
            found = (invoice.id, invoice.payment_address)
        except InvoiceExists:
            found = await _period_invoice(services, sub, invoice_id)
    assert found is not None
    invoice_pk, payment_address = found
    # Both worker processes may get here for the same period: the first row stays.
    async with services.db.transaction() as session:
        await session.execute(
            upsert(services.db.dialect, SubscriptionCharge)
            .values(
                subscription_pk=sub.id,
                period=period,
                invoice_pk=invoice_pk,
                payment_address=payment_address,
                created_at=now_ms,
                updated_at=now_ms,
            )
            .on_conflict_do_nothing(index_elements=["subscription_pk", "period"])
        )


async def _period_invoice(
    services: Services, sub: Subscription, invoice_id: str
) -> tuple[str, str] | None:
    """The id and escrow of the period's invoice, if it was created."""
    async with services.db.sessions() as session:
        row = await session.execute(
            select(Invoice.id, Invoice.payment_address).where(
                Invoice.owner_key == sub.owner_key,
                Invoice.chain_id == sub.chain_id,
                Invoice.invoice_id == invoice_id,
            )
        )
        found = row.first()
    return None if found is None else (found[0], found[1])


async def charge_due_once(services: Services) -> int:
    """Charge every due period of every active or past-due subscription on the chains this
    service is configured for (one on a chain it no longer serves waits, untouched, as its
    invoices do); returns how many subscriptions were looked at."""
    served = [chain.config.chain_id for chain in services.chains.all()]
    async with services.db.sessions() as session:
        subs = list(
            await session.scalars(
                select(Subscription)
                .where(
                    Subscription.status.in_(
                        [SubscriptionStatus.ACTIVE, SubscriptionStatus.PAST_DUE]
                    ),
                    Subscription.chain_id.in_(served),
                )
                .order_by(Subscription.chain_id, Subscription.id)
            )
        )
    chain_time: dict[int, int] = {}
    for sub in subs:
        chain = services.chains.get(sub.chain_id)
        if sub.chain_id not in chain_time:
            chain_time[sub.chain_id] = await chain.block_timestamp(await chain.block_number())
        await _advance(services, chain, sub, chain_time[sub.chain_id])
    return len(subs)


async def _advance(services: Services, chain: ChainGateway, sub: Subscription, now_s: int) -> None:
    """One step for one subscription at chain time ``now_s``."""
    terms = terms_of(sub)
    period = sub.next_period
    if sub.max_periods and period >= sub.max_periods:
        await set_status(services, sub.id, SubscriptionStatus.FINISHED, {})
        return
    assert sub.payer is not None and sub.signature is not None
    charged, cancelled = await chain.subscription_state(
        terms.contract, terms.id_of(sub.payer), period
    )
    if cancelled:
        await set_status(services, sub.id, SubscriptionStatus.CANCELLED, {"by": "payer"})
        return
    if sub.status == SubscriptionStatus.PAST_DUE:
        await paid_by_hand(services, sub.id)
    due_at = terms.due_at(period)
    retry_at = sub.retry_at or 0
    if now_s < due_at or services.clock.now_ms() < retry_at:
        return
    await _charge_invoice(services, chain, sub, terms, sub.payer, period)
    charge = _charge(services, sub, terms, sub.payer, sub.signature, period)
    try:
        if not charged:
            await relay_payment(services, chain, charge)
    except ChainUnavailable:
        raise
    except ServiceError as exc:  # refused, nothing sent: tried again, or the period failed
        grace_over = now_s >= due_at + services.settings.subscription_grace_s
        await _failed(services, sub, period, grace_over, exc)
        return
    await _charged(services, sub.id, period, on_chain=charged)


async def _charged(services: Services, pk: str, period: int, *, on_chain: bool) -> None:
    """The period's charge is sent (its transaction's end is ``settle.settle_charge``'s),
    or, ``on_chain``, the bitmap has it charged already (sent before a restart, or by
    anyone else)."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        sub = await session.get(Subscription, pk, with_for_update=True)
        assert sub is not None
        if sub.status in FINAL or sub.next_period != period:
            return
        sub.next_period, sub.retry_at, sub.updated_at = period + 1, None, now_ms
        if on_chain:
            charge = await session.get(SubscriptionCharge, (pk, period))
            assert charge is not None
            await confirmed(session, services, sub, charge, now_ms)


async def _failed(
    services: Services, sub: Subscription, period: int, grace_over: bool, exc: Exception
) -> None:
    """A refused charge: tried again later, or, after the grace window, a failed period."""
    now_ms = services.clock.now_ms()
    settings = services.settings
    log.info("subscription %s period %s not charged: %s", sub.id, period, exc)
    async with services.db.transaction() as session:
        row = await session.get(Subscription, sub.id, with_for_update=True)
        assert row is not None
        if row.status in FINAL or row.next_period != period:
            return
        row.updated_at = now_ms
        if not grace_over:
            row.retry_at = now_ms + settings.subscription_retry_s * 1000
            return
        row.next_period, row.retry_at = period + 1, None
        row.failed_periods += 1
        await _mark(session, sub.id, period, ChargeStatus.FAILED, now_ms)
        if row.failed_periods >= settings.subscription_max_failed_periods:
            row.status, row.cancelled_at = SubscriptionStatus.CANCELLED, now_ms
            extra: dict[str, Any] = {"by": "service", "failedPeriods": row.failed_periods}
            await record_event(session, services, row, SubscriptionEvent.CANCELLED, extra)
        elif row.status != SubscriptionStatus.PAST_DUE:
            row.status = SubscriptionStatus.PAST_DUE
            await record_event(
                session, services, row, SubscriptionEvent.PAST_DUE, {"period": period}
            )


async def _mark(session: AsyncSession, pk: str, period: int, status: str, now_ms: int) -> None:
    await session.execute(
        update(SubscriptionCharge)
        .where(SubscriptionCharge.subscription_pk == pk, SubscriptionCharge.period == period)
        .values(status=status, updated_at=now_ms)
    )


async def charge_due(services: Services, stop: asyncio.Event) -> None:
    """The worker loop: ``charge_due_once`` every ``subscription_interval_s``."""
    while not stop.is_set():
        try:
            await charge_due_once(services)
        except ChainUnavailable as exc:
            log.warning("subscriptions: a chain did not answer: %s", exc)
        try:
            await asyncio.wait_for(stop.wait(), timeout=services.settings.subscription_interval_s)
        except TimeoutError:
            pass


SUBSCRIPTIONS = PaymentMethod(
    "subscriptions",
    finality={
        TxPurpose.SUBSCRIPTION_CHARGE: OnFinal(settle_charge),
        # A relayed permit or cancellation: the seam's row confirmed or failed, as a charge's.
        TxPurpose.SUBSCRIPTION_PERMIT: OnFinal(settle_charge),
        TxPurpose.SUBSCRIPTION_CANCEL: OnFinal(settle_charge),
    },
    worker=charge_due,
)
