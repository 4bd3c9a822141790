"""The payer's language: ``?lang=`` over ``Accept-Language`` over English, and amounts and
times written by Babel in that language."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.web.page.i18n import (
    ENGLISH,
    LANGUAGES,
    MAX_RANGES,
    PageLocale,
    accepted_tags,
    language_of_tag,
    negotiate,
)

BY_CODE = {language.code: language for language in LANGUAGES}


@pytest.mark.parametrize(
    ("lang", "header", "expected"),
    [
        (None, None, "en"),
        (None, "", "en"),
        (None, "de-DE,de;q=0.9,en;q=0.8", "de"),
        (None, "pt-BR", "pt"),
        (None, "nl-NL, fr;q=0.5, es;q=0.7", "es"),  # weights, not order
        (None, "fr;q=0.5, ja;q=0.5", "fr"),  # equal weights keep their order
        (None, "zh-CN,zh;q=0.9", "zh-Hans"),
        (None, "zh-Hans-SG", "zh-Hans"),
        (None, "zh-TW,ja;q=0.2", "ja"),  # traditional Chinese is not offered as simplified
        (None, "zh-Hant", "en"),
        (None, "ar-EG", "ar"),
        (None, "es;q=0, fr", "fr"),  # q=0: not acceptable
        (None, "*", "en"),
        (None, "de;q=2, fr", "fr"),  # a malformed weight drops its entry
        (None, "de;q=0.5;x=1, fr;q=0.1", "fr"),
        (None, "!!, ja", "ja"),
        ("es", "de", "es"),
        ("ES-mx", "de", "es"),
        ("zh-Hans", None, "zh-Hans"),
        ("ar", "en", "ar"),
        ("xx", "de", "de"),  # an unknown ?lang= falls back to the header
        ("", "ja", "ja"),
        ("<script>", "fr", "fr"),
        ("e" * 5000, None, "en"),
    ],
)
def test_negotiation(lang: str | None, header: str | None, expected: str) -> None:
    assert negotiate(lang, header).code == expected


def test_only_the_first_ranges_of_a_long_header_are_read() -> None:
    header = ",".join(["xx"] * MAX_RANGES + ["de"])

    assert accepted_tags(header) == ["xx"] * MAX_RANGES
    assert negotiate(None, header) == ENGLISH


@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=80)))
def test_any_header_and_lang_negotiate_to_a_supported_language(
    header: str, lang: str | None
) -> None:
    assert negotiate(lang, header) in LANGUAGES


TAG = st.from_regex(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}", fullmatch=True)
WEIGHT = st.integers(min_value=0, max_value=1000)


@given(st.lists(st.tuples(TAG, WEIGHT), min_size=1, max_size=10))
def test_weighted_ranges_come_back_most_wanted_first(entries: list[tuple[str, int]]) -> None:
    header = ", ".join(f"{tag};q={weight / 1000:.3f}" for tag, weight in entries)

    tags = accepted_tags(header)

    wanted = sorted((e for e in entries if e[1] > 0), key=lambda e: -e[1])
    assert tags == [tag for tag, _ in wanted]
    supported = [language_of_tag(tag) for tag in tags]
    expected = next((language for language in supported if language is not None), ENGLISH)
    assert negotiate(None, header) == expected


@pytest.mark.parametrize(
    ("code", "amount", "time"),
    [
        ("en", "12,345.125000000000000001", "Mar 17, 2030, 5:46\u202fPM UTC"),
        ("es", "12.345,125000000000000001", "17 mar 2030, 17:46 UTC"),
        ("pt", "12.345,125000000000000001", "17 de mar. de 2030 17:46 UTC"),
        ("fr", "12\u202f345,125000000000000001", "17 mars 2030, 17:46 UTC"),
        ("de", "12.345,125000000000000001", "17.03.2030, 17:46 UTC"),
        ("zh-Hans", "12,345.125000000000000001", "2030年3月17日 17:46 UTC"),
        ("ja", "12,345.125000000000000001", "2030/03/17 17:46 UTC"),
        ("ar", "12,345.125000000000000001", "17\u200f/03\u200f/2030، 5:46 م UTC"),
    ],
)
def test_amounts_keep_every_digit_and_times_follow_the_language(
    code: str, amount: str, time: str
) -> None:
    locale = PageLocale(BY_CODE[code])

    assert locale.amount("12345.125000000000000001") == amount
    assert locale.time(1_900_000_000_000) == time
    assert locale.direction == ("rtl" if code == "ar" else "ltr")
