"""The dashboard's pages: Jinja2 templates (``page/templates/dashboard``) rendered in the
payment page's template environment, so one autoescape and one catalogue serve both; the
modules of the dashboard only build the values a template draws. Also its headers and the
assets it serves itself.

No inline script or style anywhere: the Content-Security-Policy (:data:`HEADERS`) forbids
them, and htmx is configured by a meta tag of ``dashboard/layout.html`` not to add its
indicator styles or evaluate code.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

from invoicing.web.dashboard.words import PARTLY_PAID, status_words
from invoicing.web.page.i18n import LANGUAGES
from invoicing.web.page.render import template

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: with it a form POST sends "Origin: null", and the Origin check needs it.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
ASSET_TYPES = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "htmx.min.js": "text/javascript; charset=utf-8",
}
NAV = (
    ("overview", "/dashboard", "Overview"),
    ("invoices", "/dashboard/invoices", "Invoices"),
    ("create", "/dashboard/invoices/new", "Create"),
    ("subscriptions", "/dashboard/subscriptions", "Subscriptions"),
    ("webhooks", "/dashboard/webhooks", "Webhooks"),
    ("keys", "/dashboard/api-keys", "API keys"),
    ("brand", "/dashboard/brand", "Brand"),
    ("reports", "/dashboard/reports", "Reports"),
    ("email", "/dashboard/email", "Email"),
    ("team", "/dashboard/team", "Team"),
    ("settings", "/dashboard/settings", "Settings"),
)


@cache
def asset(name: str) -> bytes:
    if name not in ASSET_TYPES:
        raise KeyError(name)
    return files("invoicing.web.dashboard").joinpath("static", name).read_bytes()


@cache
def asset_url(name: str) -> str:
    version = hashlib.sha256(asset(name)).hexdigest()[:12]
    return f"/dashboard/assets/{name}?v={version}"


def dashboard_html(name: str, **values: Any) -> str:
    """``page/templates/dashboard/<name>`` rendered in the payment page's template
    environment (its autoescape, its catalogue: the dashboard speaks English)."""
    return template(LANGUAGES[0], f"dashboard/{name}").render(**values)


def page_html(
    name: str,
    title: str,
    *,
    owner: str | None = None,
    csrf: str | None = None,
    active: str = "",
    **values: Any,
) -> str:
    """A whole page (``name`` extends ``dashboard/layout.html``): the navigation for a
    signed-in owner, then the page's own part, drawn from ``values``."""
    return dashboard_html(
        name,
        title=title,
        owner=owner,
        owner_short=None if owner is None else short_address(owner),
        csrf=csrf,
        active=active,
        nav=NAV,
        assets={asset_name: asset_url(asset_name) for asset_name in ASSET_TYPES},
        **values,
    )


def invoice_badge(status: str, balance_raw: str | int) -> tuple[str, str]:
    """An invoice's status badge (its colour, its words); a pending one that received part
    is partly paid."""
    words = status_words(status, balance_raw)
    return ("partial" if words == PARTLY_PAID else status, words)


def utc_text(ms: int | None) -> str:
    if ms is None:
        return "–"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def short_address(address: str) -> str:
    """``0x12Ab…9fE0``: the first and last four digits (the whole one stays in a title)."""
    return f"{address[:6]}…{address[-4:]}" if len(address) > 12 else address
