"""The payment page's catalogues: every message the templates and the page's Python code use
is translated in every language, with the same placeholders, and no catalogue holds a message
nobody uses. A new ``_("…")`` without its translations fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.catalog import Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg

from invoicing.web.page.i18n import ENGLISH, LANGUAGES, Language, PageLocale, read_catalogue
from invoicing.web.page.texts import return_texts

ROOT = Path(__file__).resolve().parents[2]
OTHER_LANGUAGES = [language for language in LANGUAGES if language != ENGLISH]


def used_messages() -> set[str]:
    """What ``make messages`` extracts (babel.cfg)."""
    with (ROOT / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _file, _line, message, _comments, context in extract_from_dir(
        ROOT, method_map, options_map
    ):
        assert context is None, f"{message!r}: message contexts are not used"
        # a plural message (ngettext) is known by its singular text
        found.add(message[0] if isinstance(message, tuple) else message)
    return found


USED = used_messages()


def message_id(message: Message) -> str:
    return message.id[0] if isinstance(message.id, tuple) else message.id


def strings(message: Message) -> tuple[str, ...]:
    return message.string if isinstance(message.string, tuple) else (message.string,)


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
    forms = catalogue.num_plurals
    translated = {
        message_id(message)
        for message in catalogue
        if message.id
        and not message.fuzzy
        and all(strings(message))
        and (not message.pluralizable or len(strings(message)) == forms)
    }
    present = {message_id(message) for message in catalogue if message.id}

    assert sorted(USED - translated) == []  # missing or untranslated
    assert sorted(present - USED) == []  # no longer used: `make messages` drops them
    problems = [(message.id, errors) for message, errors in catalogue.check() if errors]
    assert problems == []  # placeholders: the same names as the English text


@pytest.mark.parametrize("language", OTHER_LANGUAGES, ids=lambda language: language.code)
def test_a_translation_differs_from_the_english_text(language: Language) -> None:
    """Copies of the English text are not translations (numbers-only messages excepted)."""
    catalogue = read_catalogue(language)
    same = {message_id(m) for m in catalogue if m.id and m.string == m.id}

    assert same <= {"%(time)s UTC", "Error %(code)s"}


def test_plural_forms_follow_each_language() -> None:
    def returning(code: str, seconds: int) -> str:
        locale = PageLocale(next(lang for lang in LANGUAGES if lang.code == code))
        texts = return_texts(locale, "shop.example")["countdown"]
        assert isinstance(texts, list)
        return str(texts[seconds])

    assert returning("en", 1) == "Returning to shop.example in 1 second."
    assert returning("en", 10) == "Returning to shop.example in 10 seconds."
    assert returning("fr", 0) == "Retour sur shop.example dans 0 seconde."  # French: 0 is singular
    assert returning("de", 0) == "Zurück zu shop.example in 0 Sekunden."
    assert returning("ar", 2) == "سيتم نقلك إلى shop.example خلال ثانيتين."
    assert returning("ar", 7) == "سيتم نقلك إلى shop.example خلال 7 ثوانٍ."
    assert returning("ja", 3) == "3 秒後に shop.example に戻ります。"


def test_catalogue_of_each_language_is_the_one_the_page_loads() -> None:
    assert PageLocale(LANGUAGES[1])._("Awaiting payment") == "Pendiente de pago"
    assert PageLocale(LANGUAGES[7])._("Payment request") == "طلب دفع"
    assert PageLocale(ENGLISH)._("Payment request") == "Payment request"
