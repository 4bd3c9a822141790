"""Subscriptions in the dashboard: the owner's list, one subscription with its charges (each
period's invoice, its status and transaction), and its cancellation (the same domain call as
``DELETE /integration/subscriptions``; docs/integration/subscriptions.md). Rendered with the
dashboard's templates (``dashboard/subscription*.html``), English."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from invoicing.errors import NotFound, ServiceError, UnsupportedChain
from invoicing.payments.subscriptions.models import SubscriptionStatus
from invoicing.payments.subscriptions.service import (
    FINAL,
    SubscriptionView,
    cancel_by_owner,
    list_subscriptions,
    owned_subscription,
    view_of,
)
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import chain_name, html_page, symbol
from invoicing.web.dashboard.render import short_address, utc_text
from invoicing.web.dashboard.session import SignedIn

router = APIRouter(prefix="/dashboard", include_in_schema=False)
PAGE_SIZE = 20
STATUS_TEXT = {
    SubscriptionStatus.AWAITING_AUTHORIZATION: "awaiting signature",
    SubscriptionStatus.ACTIVE: "active",
    SubscriptionStatus.PAST_DUE: "past due",
    SubscriptionStatus.CANCELLED: "cancelled",
    SubscriptionStatus.FINISHED: "finished",
}
CHARGE_TEXT = {
    None: "not tried yet",
    "submitted": "sent",
    "confirmed": "charged",
    "reverted": "reverted, trying again",
    "failed": "failed",
}


def period_text(seconds: int) -> str:
    """``86400`` → ``1 day``; the largest unit that divides it."""
    for unit, size in (("week", 604_800), ("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


def _amount(services: Services, view: SubscriptionView) -> str:
    sub = view.subscription
    return f"{sub.amount} {symbol(services, sub.chain_id, sub.token_address)}"


def _next_charge(view: SubscriptionView) -> str:
    at = view.next_charge_at_ms
    return "–" if at is None else utc_text(at)


def _row(services: Services, view: SubscriptionView) -> dict[str, Any]:
    sub = view.subscription
    return {
        "id": sub.id,
        "name": sub.subscription_ref or sub.description or sub.id,
        "status": sub.status,
        "status_text": STATUS_TEXT[SubscriptionStatus(sub.status)],
        "amount": _amount(services, view),
        "period": period_text(sub.period_seconds),
        "payer": sub.payer,
        "payer_short": short_address(sub.payer or ""),
        "next_charge": _next_charge(view),
        "charges": len(view.charges),
        "created": utc_text(sub.created_at),
    }


def _tx_url(services: Services, chain_id: int, tx_hash: str | None) -> str | None:
    try:
        explorer = services.chains.get(chain_id).config.explorer
    except UnsupportedChain:
        return None
    return None if explorer is None or tx_hash is None else f"{explorer}/tx/{tx_hash}"


def detail_values(services: Services, view: SubscriptionView) -> dict[str, Any]:
    """What the subscription's page shows: its facts, its webhook URL, its charges, whether
    it may be cancelled."""
    sub = view.subscription
    max_periods = "no end" if sub.max_periods == 0 else str(sub.max_periods)
    facts = [
        ("Status", STATUS_TEXT[SubscriptionStatus(sub.status)]),
        ("Id", sub.id),
        ("Your reference", sub.subscription_ref or "–"),
        ("Per period", _amount(services, view)),
        ("Every", period_text(sub.period_seconds)),
        ("Periods", max_periods),
        ("Chain", chain_name(services, sub.chain_id)),
        ("Payer", sub.payer or "not signed yet"),
        ("Next charge", _next_charge(view)),
        ("Failed periods in a row", str(sub.failed_periods)),
        ("Created", utc_text(sub.created_at)),
        ("Payer's page", f"{services.settings.base_url.rstrip('/')}/subscribe/{sub.id}"),
    ]
    charges = [
        {
            "period": charge.period,
            "invoice_pk": charge.invoice_pk,
            "payment_address": charge.payment_address,
            "escrow_short": short_address(charge.payment_address),
            "invoice_status": invoice_status,
            "charge_status": CHARGE_TEXT.get(charge.status, charge.status),
            "tx_hash": tx,
            "tx_short": short_address(tx or ""),
            "tx_url": _tx_url(services, sub.chain_id, tx),
        }
        for charge, invoice_status, tx in view.charges
    ]
    return {
        "facts": facts,
        "charges": charges,
        "can_cancel": sub.status not in FINAL,
        "id": sub.id,
        # Where each period's invoice sends its paid webhook (None: no paid webhook).
        "webhook_url": sub.webhook_url,
    }


@router.get("/subscriptions", response_class=HTMLResponse)
async def subscriptions_list(request: Request, owner: SignedIn) -> HTMLResponse:
    services = services_of(request)
    raw_page = request.query_params.get("page", "1")
    page = int(raw_page) if raw_page.isdigit() and 0 < int(raw_page) < 2**31 else 1
    views, total = await list_subscriptions(services.db, owner.key, page, PAGE_SIZE)
    return html_page(
        "subscriptions.html",
        "Subscriptions",
        owner,
        "subscriptions",
        notice=request.query_params.get("notice"),
        rows=[_row(services, view) for view in views],
        page=page,
        pages=max(1, -(-total // PAGE_SIZE)),
    )


@router.get("/subscriptions/{subscription_pk}", response_class=HTMLResponse)
async def subscription_page(
    request: Request, subscription_pk: str, owner: SignedIn
) -> HTMLResponse:
    services = services_of(request)
    try:
        sub = await owned_subscription(services.db, owner.key, subscription_pk[:36])
    except NotFound as exc:
        return html_page(
            "message.html", "Subscription not found", owner, "subscriptions", 404, error=exc.message
        )
    view = await view_of(services.db, sub)
    return html_page(
        "subscription.html",
        f"Subscription {sub.subscription_ref or sub.id}",
        owner,
        "subscriptions",
        notice=request.query_params.get("notice"),
        **detail_values(services, view),
    )


@router.post("/subscriptions/{subscription_pk}/cancel")
async def cancel(request: Request, subscription_pk: str, owner: SignedIn) -> Response:
    services = services_of(request)
    try:
        sub = await cancel_by_owner(services, owner.key, subscription_pk[:36])
    except ServiceError as exc:
        return html_page(
            "message.html", "Subscription", owner, "subscriptions", exc.status, error=exc.message
        )
    return RedirectResponse(
        f"/dashboard/subscriptions/{sub.id}?notice=Subscription+cancelled", status_code=303
    )
