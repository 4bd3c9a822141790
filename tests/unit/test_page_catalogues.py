"""The payment page's catalogues: every message the templates and the page's Python code use
is translated in every language, with the same placeholders, and no catalogue holds a message
nobody uses. A new ``_("…")`` without its translations fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg

from invoicing.web.page.i18n import ENGLISH, LANGUAGES, Language, PageLocale, read_catalogue

ROOT = Path(__file__).resolve().parents[2]
OTHER_LANGUAGES = [language for language in LANGUAGES if language != ENGLISH]


def used_messages() -> set[str]:
    """What ``make messages`` extracts (babel.cfg)."""
    with (ROOT / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        ROOT, method_map, options_map, keywords={"_": None}
    ):
        assert isinstance(message, str), f"plural or context message {message!r}: not supported"
        found.add(message)
    return found


USED = used_messages()


def test_extraction_finds_the_page_messages() -> None:
    assert {
        "Awaiting payment",
        "Payment request",
        "Send %(amount)s on %(network)s to the payment address",
        "(%(time)s left)",
    } <= USED
    assert len(USED) >= 40


@pytest.mark.parametrize("language", OTHER_LANGUAGES, ids=lambda language: language.code)
def test_catalogue_translates_every_message_the_page_uses(language: Language) -> None:
    catalogue = read_catalogue(language)
    translated = {
        message.id: message.string
        for message in catalogue
        if message.id and message.string and not message.fuzzy
    }
    present = {message.id for message in catalogue if message.id}

    assert sorted(USED - translated.keys()) == []  # missing or untranslated
    assert sorted(present - USED) == []  # no longer used: `make messages` drops them
    problems = [(message.id, errors) for message, errors in catalogue.check() if errors]
    assert problems == []  # placeholders: the same names as the English text


@pytest.mark.parametrize("language", OTHER_LANGUAGES, ids=lambda language: language.code)
def test_a_translation_differs_from_the_english_text(language: Language) -> None:
    """Copies of the English text are not translations (numbers-only messages excepted)."""
    catalogue = read_catalogue(language)
    same = {m.id for m in catalogue if m.id and m.string == m.id}

    assert same <= {"%(time)s UTC", "Error %(code)s"}


def test_catalogue_of_each_language_is_the_one_the_page_loads() -> None:
    assert PageLocale(LANGUAGES[1])._("Awaiting payment") == "Pendiente de pago"
    assert PageLocale(LANGUAGES[7])._("Payment request") == "طلب دفع"
    assert PageLocale(ENGLISH)._("Payment request") == "Payment request"
