"""HTML of the dashboard: one layout, escaped values, the assets it serves itself.

Every value is escaped with :func:`e` where it is placed; functions whose names end in
``_html`` return fragments built from escaped parts. No inline script or style anywhere:
the Content-Security-Policy (:data:`HEADERS`) forbids them, and htmx is configured by a
``<meta name="htmx-config">`` tag not to add its indicator styles or evaluate code.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from functools import cache
from html import escape
from importlib.resources import files
from typing import Any

from invoicing.web.dashboard.words import PARTLY_PAID, status_words

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
HTMX_CONFIG = (
    '{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,'
    '"selfRequestsOnly":true,"historyCacheSize":0}'
)
NUM = ' class="num"'
CURRENT = ' aria-current="page"'
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


def e(value: object) -> str:
    """``value`` as HTML text (quotes escaped too: safe in attributes)."""
    return escape("" if value is None else str(value), quote=True)


@cache
def asset(name: str) -> bytes:
    if name not in ASSET_TYPES:
        raise KeyError(name)
    return files("invoicing.web.dashboard").joinpath("static", name).read_bytes()


@cache
def asset_url(name: str) -> str:
    version = hashlib.sha256(asset(name)).hexdigest()[:12]
    return f"/dashboard/assets/{name}?v={version}"


def utc_text(ms: int | None) -> str:
    if ms is None:
        return "–"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def short_address(address: str) -> str:
    """``0x12Ab…9fE0``: the first and last four digits (the whole one stays in a title)."""
    return f"{address[:6]}…{address[-4:]}" if len(address) > 12 else address


def badge_html(status: str, text: str | None = None) -> str:
    """A status badge: its colour from ``status``, its words ``text`` (default: the status)."""
    return f'<span class="badge s-{e(status)}">{e(text or status)}</span>'


def invoice_badge_html(status: str, balance_raw: str | int) -> str:
    """An invoice's status badge in words; a pending one that received part is partly paid."""
    words = status_words(status, balance_raw)
    return badge_html("partial" if words == PARTLY_PAID else status, words)


def _head(title: str, csrf: str | None) -> str:
    csrf_meta = f'<meta name="csrf-token" content="{e(csrf)}">' if csrf else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · Invoicing dashboard</title>"
        f"<meta name=\"htmx-config\" content='{HTMX_CONFIG}'>"
        f"{csrf_meta}"
        f'<link rel="stylesheet" href="{asset_url("dashboard.css")}">'
        f'<script src="{asset_url("htmx.min.js")}" defer></script>'
        f'<script src="{asset_url("dashboard.js")}" defer></script>'
        "</head>"
    )


def page(
    title: str,
    body_html: str,
    *,
    owner: str | None = None,
    csrf: str | None = None,
    active: str = "",
) -> str:
    """A whole page: the navigation for a signed-in owner, then ``body_html``."""
    header = ""
    if owner is not None:
        links = "".join(
            f'<li><a href="{href}"{CURRENT if key == active else ""}>{label}</a></li>'
            for key, href, label in NAV
        )
        header = (
            '<header class="bar"><a class="brand" href="/dashboard">Invoicing</a>'
            f'<nav aria-label="Dashboard"><ul>{links}</ul></nav>'
            '<div class="who"><span>Signed in as '
            f'<span class="mono" title="{e(owner)}" aria-hidden="true">{e(short_address(owner))}'
            f'</span><span class="visually-hidden">{e(owner)}</span></span>'
            '<form class="logout" method="post" action="/dashboard/logout">'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">'
            '<button type="submit">Sign out</button></form></div></header>'
        )
    return (
        f"{_head(title, csrf)}<body>"
        '<a class="skip" href="#main">Skip to content</a>'
        f'{header}<main id="main" tabindex="-1"><h1>{e(title)}</h1>{body_html}</main>'
        "</body></html>"
    )


def csrf_input_html(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(csrf)}">'


def table_html(headers: list[str], rows: list[list[str]], caption: str, body_id: str = "") -> str:
    """A table: ``rows`` hold HTML cells already escaped; a header starting with "#" is a
    numeric column (right-aligned, the "#" dropped). On a phone each row becomes a block of
    labelled cells (each cell's ``data-label``: its header)."""
    numeric = [h.startswith("#") for h in headers]
    head = "".join(
        f'<th scope="col"{NUM if n else ""}>{e(h.lstrip("#"))}</th>'
        for h, n in zip(headers, numeric, strict=True)
    )
    labels = [f' data-label="{e(h.lstrip("#"))}"' if h.strip("#") else "" for h in headers]
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{NUM if n else ''}{label}>{cell}</td>"
            for cell, n, label in zip(row, numeric, labels, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="muted">Nothing here yet.</td></tr>'
    tbody_id = f' id="{e(body_id)}"' if body_id else ""
    return (
        f'<div class="table-wrap" tabindex="0" role="region" aria-label="{e(caption)}">'
        f'<table><caption class="skip">{e(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody{tbody_id}>{body}</tbody></table></div>"
    )


def facts_html(facts: list[tuple[str, str]]) -> str:
    """A definition list; values are HTML already escaped."""
    return (
        '<dl class="facts">' + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>"
    )


def notice_html(text: str | None, *, error: bool = False) -> str:
    if not text:
        return ""
    role = "alert" if error else "status"
    return f'<p class="{"error" if error else "notice"}" role="{role}">{e(text)}</p>'


def attrs(**values: Any) -> str:
    """HTML attributes; None and False are left out, True is a bare attribute."""
    parts = []
    for name, value in values.items():
        key = name.rstrip("_").replace("_", "-")
        if value is None or value is False:
            continue
        parts.append(f" {key}" if value is True else f' {key}="{e(value)}"')
    return "".join(parts)


def button_form_html(
    action: str, label: str, csrf: str, *, danger: bool = False, name: str = ""
) -> str:
    """A one-button form that posts to ``action`` (``name`` says what it acts on, for a
    screen reader: "Revoke key …")."""
    kind = "danger" if danger else "secondary"
    aria = f' aria-label="{e(label)} {e(name)}"' if name else ""
    return (
        f'<form method="post" action="{e(action)}">{csrf_input_html(csrf)}'
        f'<button type="submit" class="{kind}"{aria}>{e(label)}</button></form>'
    )


def revocable_cells_html(revoked_at: int | None, action: str, csrf: str, name: str) -> list[str]:
    """The State and Revoked cells of an API key's or a signing secret's row: its badge, and
    when it was revoked or else a button that revokes it."""
    return [
        badge_html("revoked" if revoked_at else "active"),
        e(utc_text(revoked_at))
        if revoked_at
        else button_form_html(action, "Revoke", csrf, danger=True, name=name),
    ]


def shown_once_html(box_id: str, title: str, advice: str, secret: str, extra_html: str = "") -> str:
    """A new API key or signing secret, shown this once: ``title``, then ``advice`` (what to
    do with it), the secret in ``#<box_id>-value``, and ``extra_html``."""
    return (
        f'<section class="card" id="{e(box_id)}" role="status"><p><strong>{e(title)}</strong>: '
        f"{e(advice)}, it is not shown again.</p>"
        f'<code class="secret" id="{e(box_id)}-value">{e(secret)}</code>{extra_html}</section>'
    )
