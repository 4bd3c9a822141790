"""HTML rendering with Jinja2 templates in the request's language: autoescaped, every
sentence through the language's catalogue (``_()`` in the templates, newstyle gettext), every
amount and time formatted by Babel for that language."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files

from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from markupsafe import Markup

from invoicing.chain.config import Eip712Domain
from invoicing.web.page.i18n import LANGUAGES, Language, PageLocale, translations
from invoicing.web.page.texts import RETURN_COUNTDOWN_S, done_texts, script_texts, status_labels
from invoicing.web.page.view import AUTO_RETURN_WINDOW_MS, PaymentView

ASSET_TYPES = {
    "pay.css": "text/css; charset=utf-8",
    "pay.js": "text/javascript; charset=utf-8",
    "subscribe.js": "text/javascript; charset=utf-8",
}


@cache
def environment(language: Language) -> Environment:
    """One template environment per language, its catalogue installed (newstyle gettext:
    ``_("Send %(amount)s", amount=…)`` escapes the values, not the translation)."""
    env = Environment(
        loader=PackageLoader("invoicing.web.page", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.install_gettext_translations(translations(language), newstyle=True)  # type: ignore[attr-defined]
    return env


def template(language: Language, name: str) -> Template:
    return environment(language).get_template(name)


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


def logo_path(sha256: str) -> str:
    """A brand's logo (``web.page.brand`` serves it)."""
    return f"/pay/brand/{sha256}.png"


def theme_path(accent: str, text: str) -> str:
    """A brand's colours as a stylesheet; ``accent`` and ``text``: ``#rrggbb``, lower case."""
    return f"/pay/brand/theme-{accent[1:]}-{text[1:]}.css"


def utc_iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def script_json(data: object) -> Markup:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def site_values(locale: PageLocale, page_path: str) -> dict[str, object]:
    """What every page of the payment site shows (a payment method's pages too)."""
    return _page_values(locale, page_path)


def _page_values(locale: PageLocale, page_path: str) -> dict[str, object]:
    """What every page of the payment site shows: language, direction, assets, the
    language links (each to the same page in that language)."""
    return {
        "lang": locale.language.code,
        "dir": locale.direction,
        "css_url": asset_url("pay.css"),
        "languages": [
            {
                "code": language.code,
                "name": language.name,
                "dir": "rtl" if language.rtl else "ltr",
                "href": f"{page_path}?lang={language.code}",
                "current": language == locale.language,
            }
            for language in LANGUAGES
        ],
    }


def payment_page(
    view: PaymentView,
    locale: PageLocale | None = None,
    gasless: Eip712Domain | None = None,
    *,
    receipts: bool = False,
) -> str:
    """The full payment page; it reads well with JavaScript off, pay.js makes it live.
    ``gasless``: the token's EIP-712 domain when the page offers "Pay without gas";
    ``receipts``: whether it offers a receipt by email (pay.js sends the address)."""
    locale = locale or PageLocale(LANGUAGES[0])
    base = f"/pay/{view.payment_address}"
    return template(locale.language, "pay.html").render(
        **_page_values(locale, base),
        js_url=asset_url("pay.js"),
        view=view,
        status_label=status_labels(locale).get(
            "partial" if view.partly_paid else view.status, view.status
        ),
        done_text=done_texts(locale).get(view.status, ""),
        amount=locale.amount(view.amount_shown),
        price=None if view.price is None else locale.price(view.price[1], view.price[0]),
        rate=None if view.price is None else locale.price(view.price[2], view.price[0]),
        remaining=locale.amount(view.remaining_shown),
        expires_iso=utc_iso(view.expires_at),
        expires_text=locale.time(view.expires_at),
        qr_url=f"{base}/qr.svg?lang={locale.language.code}&r={view.remaining_raw}",
        status_url=f"{base}/status",
        qr_base_url=f"{base}/qr.svg?lang={locale.language.code}",
        pending=view.status == "pending",
        data_json=script_json(view.public_status().model_dump(mode="json", exclude_unset=True)),
        texts_json=script_json(script_texts(locale, view.shop_name)),
        shop=view.shop_name or "",
        brand=view.brand,
        logo_url=None if view.brand.logo_sha256 is None else logo_path(view.brand.logo_sha256),
        theme_url=(
            None
            if view.brand.accent_color is None or view.brand.text_color is None
            else theme_path(view.brand.accent_color, view.brand.text_color)
        ),
        return_countdown_s=RETURN_COUNTDOWN_S,
        auto_return_window_ms=AUTO_RETURN_WINDOW_MS,
        gasless=gasless,
        receipts=receipts,
        receipt_url=f"{base}/receipt?lang={locale.language.code}",
    )


def error_page(locale: PageLocale, status_code: int, title: str, message: str) -> str:
    """An error page; ``title`` and ``message`` are already in the request's language."""
    return template(locale.language, "error.html").render(
        **_page_values(locale, ""),
        status_code=status_code,
        title=title,
        message=message,
    )
