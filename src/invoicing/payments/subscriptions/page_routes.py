"""The payer's pages of a subscription (docs/subscribing.md): ``/subscribe/<id>`` to
subscribe (connect a wallet, permit or approve, sign; subscribe.js posts the authorization)
and ``/subscribe/<id>/manage`` to see it and cancel it with the payer's signature. Same
templates, catalogues, brand and headers as the invoice payment page; public and counted
against the client's rate limit.

A method's routes belong to the web layer though they live in its folder: this module runs
up to ``web.context``, ``web.page.i18n``, ``web.page.render``, ``web.page.routes`` and
``web.page.texts``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from babel.dates import format_timedelta
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from invoicing.brand.service import brand_of
from invoicing.errors import NotFound, UnsupportedChain
from invoicing.payments.subscriptions.models import Subscription, SubscriptionStatus
from invoicing.payments.subscriptions.permit import permit_domain
from invoicing.payments.subscriptions.service import find_subscription, terms_of, view_of
from invoicing.services import Services
from invoicing.web.context import services_of
from invoicing.web.page.i18n import PageLocale
from invoicing.web.page.render import (
    asset_url,
    error_page,
    logo_path,
    script_json,
    site_values,
    template,
    theme_path,
)
from invoicing.web.page.routes import PAGE_HEADERS, LangParam, limit_client, page_locale
from invoicing.web.page.texts import status_labels

router = APIRouter(prefix="/subscribe", dependencies=[Depends(limit_client)])


def subscription_labels(locale: PageLocale) -> dict[str, str]:
    _ = locale.gettext.gettext
    return {
        SubscriptionStatus.AWAITING_AUTHORIZATION: _("Awaiting your signature"),
        SubscriptionStatus.ACTIVE: _("Active"),
        SubscriptionStatus.PAST_DUE: _("Past due"),
        SubscriptionStatus.CANCELLED: _("Cancelled"),
        SubscriptionStatus.FINISHED: _("Finished"),
    }


def script_texts(locale: PageLocale) -> dict[str, object]:
    """Everything subscribe.js writes, by key; ``%(name)s`` marks what it fills in."""
    _ = locale.gettext.gettext
    return {
        "labels": subscription_labels(locale),
        "noWallet": _(
            "No browser wallet found. Install one, or open this page in your wallet app's browser."
        ),
        "confirmInWallet": _("Confirm the request in your wallet…"),
        "rejected": _("You rejected the request in your wallet."),
        "unknownNetwork": _(
            "Your wallet does not know this network (%(network)s, chain ID %(chainId)s). "
            "Add it to your wallet and try again."
        ),
        "walletError": _("The wallet reported an error: %(error)s"),
        "signPermit": _("Sign the permit in your wallet (no network fee)…"),
        "approve": _("Approve in your wallet, then wait for the network to confirm it…"),
        "signSubscription": _("Sign the subscription in your wallet (no network fee)…"),
        "submitting": _("Starting the subscription…"),
        "notSubscribed": _("The subscription could not be started: %(error)s"),
        "wrongAccount": _("Connect the wallet that subscribed (%(payer)s)."),
        "signCancel": _("Sign the cancellation in your wallet (no network fee)…"),
        "cancelled": _("Cancelled: nothing more will be charged."),
        "notCancelled": _("The cancellation could not be sent: %(error)s"),
    }


@router.get("/{subscription_id}", response_class=HTMLResponse, include_in_schema=False)
async def subscribe_page(
    request: Request, subscription_id: str, lang: LangParam = None
) -> HTMLResponse:
    return await _page(request, subscription_id, lang, manage=False)


@router.get("/{subscription_id}/manage", response_class=HTMLResponse, include_in_schema=False)
async def manage_page(
    request: Request, subscription_id: str, lang: LangParam = None
) -> HTMLResponse:
    return await _page(request, subscription_id, lang, manage=True)


async def _page(request: Request, pk: str, lang: str | None, *, manage: bool) -> HTMLResponse:
    locale = page_locale(request, lang)
    headers = {**PAGE_HEADERS, "Content-Language": locale.language.code, "Vary": "Accept-Language"}
    services = services_of(request)
    try:
        sub = await find_subscription(services.db, pk[:36])
        html = await _render(services, sub, locale, manage)
    except (NotFound, UnsupportedChain):
        _ = locale.gettext.gettext
        title, message = _("Subscription not found"), _("There is no subscription at this link.")
        html = error_page(locale, 404, title, message)
        return HTMLResponse(html, status_code=404, headers=headers)
    return HTMLResponse(html, headers=headers)


async def _render(services: Services, sub: Subscription, locale: PageLocale, manage: bool) -> str:
    _ = locale.gettext.gettext
    chain = services.chains.get(sub.chain_id)
    token = chain.config.token(sub.token_address)
    brand = await brand_of(services.db, sub.owner_key)
    terms = terms_of(sub)
    view = await view_of(services.db, sub)
    base = f"/subscribe/{sub.id}"
    path = f"{base}/manage" if manage else base
    period = format_timedelta(
        timedelta(seconds=sub.period_seconds), locale=locale.babel_locale(), threshold=1.0
    )
    next_ms = view.next_charge_at_ms
    charge_labels = status_labels(locale)
    domain = permit_domain(chain, sub.token_address)
    data: dict[str, Any] = {
        "id": sub.id,
        "status": sub.status,
        "chainId": sub.chain_id,
        "network": chain.config.name,
        "token": sub.token_address,
        "spender": terms.contract,
        "amountRaw": sub.amount_raw,
        "maxPeriods": sub.max_periods,
        "typedData": terms.typed_data(wire=True),
        "permit": None if domain is None else {"name": domain.name, "version": domain.version},
        "authorizationUrl": f"{base}/authorization",
        "cancellationUrl": f"{base}/cancellation",
        "payer": sub.payer,
        "cancelTypedData": None if sub.payer is None else terms.cancel_typed_data(sub.payer),
    }
    shop = brand.display_name or ""
    return template(locale.language, "subscribe.html").render(
        **site_values(locale, path),
        js_url=asset_url("subscribe.js"),
        manage=manage,
        heading=_("Your subscription") if manage else _("Subscription"),
        status=sub.status,
        status_class=sub.status.replace("_", "-"),
        status_label=subscription_labels(locale).get(sub.status, sub.status),
        description=sub.description,
        amount=locale.amount(sub.amount),
        symbol=token.symbol if token is not None else "",
        price=None
        if token is None or token.pegged is None
        else locale.price(sub.amount, token.pegged),
        period=period,
        count_text=(
            _("Until you cancel")
            if sub.max_periods == 0
            else _("%(count)s, then it ends") % {"count": locale.amount(str(sub.max_periods))}
        ),
        first_charge=locale.time(services.clock.now_ms()),
        next_charge=None if next_ms is None else locale.time(next_ms),
        payer=sub.payer,
        network=chain.config.name,
        chain_id=sub.chain_id,
        token=sub.token_address,
        charges=[
            {"period": c.period, "status": charge_labels.get(s, s), "tx": tx}
            for c, s, tx in view.charges
        ],
        cancellable=sub.status in (SubscriptionStatus.ACTIVE, SubscriptionStatus.PAST_DUE),
        awaiting=sub.status == SubscriptionStatus.AWAITING_AUTHORIZATION,
        permit=domain is not None,
        redirect_url=sub.redirect_url,
        cancel_url=sub.cancel_url,
        manage_url=f"{base}/manage?lang={locale.language.code}",
        shop=shop or _("the shop"),
        brand=brand,
        logo_url=None if brand.logo_sha256 is None else logo_path(brand.logo_sha256),
        theme_url=(
            None
            if brand.accent_color is None or brand.text_color is None
            else theme_path(brand.accent_color, brand.text_color)
        ),
        data_json=script_json(data),
        texts_json=script_json(script_texts(locale)),
    )
