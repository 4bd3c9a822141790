"""Every router of the dashboard, in the order they are matched (``/invoices/new`` before
``/invoices/{id}``)."""

from __future__ import annotations

from invoicing.web.dashboard import (
    assets,
    brand_page,
    create,
    detail,
    invoices,
    keys,
    login,
    mail_page,
    overview,
    refund_claims,
    reports_page,
    settings_page,
    signed,
    subscriptions_page,
    team_page,
    wallet_refund,
    webhooks,
)

ROUTERS = (
    assets.router,
    login.router,
    overview.router,
    create.router,
    invoices.router,
    detail.router,
    signed.router,
    wallet_refund.router,
    refund_claims.router,
    keys.router,
    webhooks.router,
    settings_page.router,
    brand_page.router,
    mail_page.router,
    reports_page.router,
    subscriptions_page.router,
    team_page.router,
)
