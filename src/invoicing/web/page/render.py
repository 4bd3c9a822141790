"""HTML rendering with string templates: every value is escaped unless its name ends in
``_html`` (fragments this module built itself from escaped parts)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from html import escape
from importlib.resources import files
from string import Template

from invoicing.web.page.view import PaymentView

STATUS_LABELS = {
    "pending": "Awaiting payment",
    "paid": "Payment received",
    "completed": "Payment complete",
    "expired": "Expired",
    "cancelled": "Cancelled",
}
DONE_TEXT = {
    "paid": "Thank you: your payment has arrived. You can close this page.",
    "completed": "Thank you: this invoice is paid and settled. You can close this page.",
    "expired": "This invoice has expired. Please do not send funds to this address; "
    "ask the merchant for a new payment link.",
    "cancelled": "This invoice was cancelled. Please do not send funds to this address.",
}
ASSET_TYPES = {"pay.css": "text/css; charset=utf-8", "pay.js": "text/javascript; charset=utf-8"}


@cache
def template(name: str) -> Template:
    return Template(files("invoicing.web.page").joinpath("templates", name).read_text("utf-8"))


@cache
def asset(name: str) -> bytes:
    """A file of ``page/static`` (only the known ones: the name is never a path)."""
    if name not in ASSET_TYPES:
        raise KeyError(name)
    return files("invoicing.web.page").joinpath("static", name).read_bytes()


@cache
def asset_url(name: str) -> str:
    """Versioned URL, so browsers may cache assets and still pick up a new release."""
    version = hashlib.sha256(asset(name)).hexdigest()[:12]
    return f"/pay/assets/{name}?v={version}"


def render(name: str, **values: str) -> str:
    escaped = {k: v if k.endswith("_html") else escape(v, quote=True) for k, v in values.items()}
    return template(name).substitute(escaped)


def utc_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def utc_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _script_json(data: object) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _hidden(visible: bool) -> str:
    return "" if visible else " hidden"


def payment_page(view: PaymentView) -> str:
    """The full payment page; it reads well with JavaScript off, pay.js makes it live."""
    base = f"/pay/{view.payment_address}"
    description_html = (
        f'<p class="description" id="description">{escape(view.description)}</p>'
        if view.description
        else ""
    )
    token_html = (
        '<div class="fact"><dt>Token contract</dt>'
        f'<dd><code class="mono" id="token">{escape(view.token_address)}</code></dd></div>'
        if view.token_address
        else ""
    )
    explorer_html = (
        f'<a class="explorer" id="explorer" href="{escape(view.explorer_url, quote=True)}" '
        f'rel="noopener noreferrer" target="_blank">View on the {escape(view.network)} explorer</a>'
        if view.explorer_url
        else ""
    )
    pending = view.status == "pending"
    return render(
        "pay.html",
        css_url=asset_url("pay.css"),
        js_url=asset_url("pay.js"),
        status=view.status,
        status_label=STATUS_LABELS.get(view.status, view.status),
        amount=view.amount,
        remaining=view.remaining,
        symbol=view.symbol,
        network=view.network,
        chain_id=str(view.chain_id),
        payment_address=view.payment_address,
        expires_iso=utc_iso(view.expires_at),
        expires_text=utc_text(view.expires_at),
        uri=view.uri,
        qr_url=f"{base}/qr.svg?r={view.remaining_raw}",
        status_url=f"{base}/status",
        qr_base_url=f"{base}/qr.svg",
        description_html=description_html,
        token_html=token_html,
        explorer_html=explorer_html,
        pay_hidden_html=_hidden(pending),
        done_hidden_html=_hidden(not pending),
        done_text=DONE_TEXT.get(view.status, ""),
        data_html=_script_json(view.public_status().model_dump(mode="json")),
    )


def error_page(status_code: int, title: str, message: str) -> str:
    return render(
        "error.html",
        css_url=asset_url("pay.css"),
        status_code=str(status_code),
        title=title,
        message=message,
    )
