"""Where the payment page sends the payer back to the shop: an invoice's ``redirectUrl``
(after payment) and ``cancelUrl`` (when the payer gives up, or the invoice expired or was
cancelled), checked at creation.

A link is followed by the payer's browser, so it must be a plain web address the shop can
stand behind: http(s) only (never ``javascript:``, ``data:`` or any other scheme), https
outside development, at most ``MAX_URL_CHARS`` characters of printable ASCII (a shop
percent-encodes the rest), with a host and without credentials, and without a backslash
(browsers read ``https:\\\\evil.example`` as another host than a parser might).
"""

from __future__ import annotations

from urllib.parse import urlsplit

MAX_URL_CHARS = 2048
_PRINTABLE_ASCII = frozenset(chr(code) for code in range(0x21, 0x7F))


def link_problem(url: str, *, require_https: bool) -> str | None:
    """Why ``url`` cannot be a redirect or cancel link, or None when it can."""
    if len(url) > MAX_URL_CHARS:
        return f"must be at most {MAX_URL_CHARS} characters"
    if not url or not set(url) <= _PRINTABLE_ASCII:
        return "must be printable ASCII without spaces (percent-encode the rest)"
    if "\\" in url:
        return "must not contain a backslash"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return "must be an http or https URL"
    if require_https and scheme != "https":
        return "must be https"
    if not url[len(parts.scheme) :].startswith("://") or not parts.hostname:
        # ``https:host`` or ``https:/host``: browsers resolve these against the page itself
        return "must be an absolute URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not contain credentials"
    if port == 0:
        return "is not a valid URL"
    return None


def shop_name_of(url: str) -> str:
    """The host a link points to (``shop.example``), the page's name for the shop when the
    owner has set no display name."""
    host = urlsplit(url).hostname or url
    return host.removeprefix("www.")
