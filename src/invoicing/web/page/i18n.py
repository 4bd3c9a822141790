"""The payer's language on the payment page: which languages it speaks, which one a request
gets, its message catalogue and how it writes amounts and times.

The language is ``?lang=`` when that names a supported language, else the first supported
language of ``Accept-Language`` by preference, else English. Neither is ever refused: a
payer's link must open whatever their browser sends. Catalogues are the ``.po`` files under
``page/locales`` (one per language but English, whose messages are the source text), read
once per process; nothing is compiled at build time or downloaded.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from gettext import NullTranslations
from importlib.resources import files

from babel import Locale
from babel.dates import format_date, format_time, get_datetime_format
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import (
    format_currency,
    format_decimal,
    get_decimal_symbol,
    get_group_symbol,
)
from babel.support import Translations


@dataclass(frozen=True)
class Language:
    code: str  # ``?lang=`` value, ``<html lang>`` and ``Content-Language``
    locale: str  # Babel's locale id: the catalogue's folder and the number and date formats
    name: str  # the language's own name, for the language links
    rtl: bool = False


LANGUAGES: tuple[Language, ...] = (
    Language("en", "en", "English"),
    Language("es", "es", "Español"),
    Language("pt", "pt", "Português"),
    Language("fr", "fr", "Français"),
    Language("de", "de", "Deutsch"),
    Language("zh-Hans", "zh_Hans", "简体中文"),
    Language("ja", "ja", "日本語"),
    Language("ar", "ar", "العربية", rtl=True),
)
ENGLISH = LANGUAGES[0]
_BY_PRIMARY = {language.code.split("-")[0]: language for language in LANGUAGES}
# Chinese written in traditional characters is not offered as simplified Chinese.
_TRADITIONAL = {"hant", "tw", "hk", "mo"}

# RFC 4647 language ranges with an optional weight (RFC 9110 section 12.5.4).
_RANGE = re.compile(r"(\*|[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*)")
_WEIGHT = re.compile(r"q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)", re.IGNORECASE)
MAX_HEADER_CHARS = 1024
MAX_RANGES = 32


def language_of_tag(tag: str) -> Language | None:
    """The supported language a language tag asks for (``pt-BR`` → Portuguese), or None."""
    if not _RANGE.fullmatch(tag) or tag == "*":
        return None
    subtags = tag.lower().split("-")
    if subtags[0] == "zh" and _TRADITIONAL.intersection(subtags[1:]):
        return None
    return _BY_PRIMARY.get(subtags[0])


def accepted_tags(header: str) -> list[str]:
    """The language ranges of an ``Accept-Language`` value, most wanted first (a stable sort:
    equal weights keep their order); malformed entries and ``q=0`` are left out. Only the
    first ``MAX_HEADER_CHARS`` characters and ``MAX_RANGES`` entries are read."""
    weighted: list[tuple[float, str]] = []
    for entry in header[:MAX_HEADER_CHARS].split(",")[:MAX_RANGES]:
        tag, *params = (part.strip() for part in entry.split(";"))
        if not _RANGE.fullmatch(tag):
            continue
        weight = 1.0
        if params:
            match = _WEIGHT.fullmatch(params[0]) if len(params) == 1 else None
            if match is None:
                continue
            weight = float(match.group(1))
        if weight > 0:
            weighted.append((weight, tag))
    weighted.sort(key=lambda item: -item[0])
    return [tag for _, tag in weighted]


def negotiate(lang: str | None, accept_language: str | None) -> Language:
    """``?lang=`` if it names a supported language, else the best of ``Accept-Language``."""
    if lang:
        chosen = language_of_tag(lang[:64])
        if chosen is not None:
            return chosen
    for tag in accepted_tags(accept_language or ""):
        chosen = language_of_tag(tag)
        if chosen is not None:
            return chosen
    return ENGLISH


def catalogue_path(language: Language) -> str:
    return f"locales/{language.locale}/LC_MESSAGES/messages.po"


def read_catalogue(language: Language) -> Catalog:
    text = files("invoicing.web.page").joinpath(catalogue_path(language)).read_bytes()
    return read_po(io.BytesIO(text), locale=language.locale)


@cache
def translations(language: Language) -> NullTranslations:
    """The language's messages (fuzzy entries left out); English is the source text."""
    if language == ENGLISH:
        return NullTranslations()
    compiled = io.BytesIO()
    write_mo(compiled, read_catalogue(language))
    compiled.seek(0)
    return Translations(compiled)


@dataclass(frozen=True)
class PageLocale:
    """One request's language: its messages and its number and date formats."""

    language: Language

    @property
    def gettext(self) -> NullTranslations:
        return translations(self.language)

    def _(self, message: str, **values: str) -> str:
        text = self.gettext.gettext(message)
        return text % values if values else text

    @property
    def direction(self) -> str:
        return "rtl" if self.language.rtl else "ltr"

    def amount(self, decimal_text: str) -> str:
        """A decimal amount string with every digit kept, in the language's digits and
        separators (``1234.5`` → ``1.234,5`` in German)."""
        return format_decimal(
            Decimal(decimal_text), locale=self.language.locale, decimal_quantization=False
        )

    def price(self, amount: str, currency: str) -> str:
        """A fiat price in the language's currency format (``19.99`` USD → ``$19.99`` in
        English, ``19,99 $`` in French), every digit kept."""
        return format_currency(
            Decimal(amount),
            currency,
            locale=self.language.locale,
            currency_digits=False,
            decimal_quantization=False,
        )

    def time(self, ms: int) -> str:
        """A UTC time to the minute in the language's date order and words."""
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
        locale = self.language.locale
        combined = str(get_datetime_format("medium", locale=locale))
        text = combined.replace("{1}", format_date(moment, "medium", locale=locale)).replace(
            "{0}", format_time(moment, "short", tzinfo=UTC, locale=locale)
        )
        return self._("%(time)s UTC", time=text)

    def number_symbols(self) -> Mapping[str, str]:
        """What pay.js needs to write amounts as :meth:`amount` does (every supported locale
        groups integer digits by three)."""
        locale = self.language.locale
        return {"decimal": get_decimal_symbol(locale), "group": get_group_symbol(locale)}

    def babel_locale(self) -> Locale:
        return Locale.parse(self.language.locale)
