"""Mail texts, addresses and the SMTP URL, on their own (no server)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.errors import InvalidRequest
from invoicing.notifications.mail.choices import checked_email
from invoicing.notifications.mail.smtp import OutgoingMail, SmtpMailer, SmtpServer, compose
from invoicing.notifications.mail.texts import (
    LANGUAGE_CODES,
    MESSAGE_IDS,
    SUBJECTS,
    SUBSCRIPTION_SUBJECTS,
    catalogue,
    subject_and_body,
    subscription_subject_and_body,
)
from invoicing.settings import Settings
from invoicing.web.page.i18n import LANGUAGES


def test_mail_speaks_the_payment_pages_languages() -> None:
    assert LANGUAGE_CODES == tuple(language.code for language in LANGUAGES)


@pytest.mark.parametrize("language", [code for code in LANGUAGE_CODES if code != "en"])
def test_every_message_is_translated_with_the_same_placeholders(language: str) -> None:
    translated = catalogue(language)
    assert set(translated) == set(MESSAGE_IDS)
    assert all(translated[subject] != subject for subject in SUBJECTS.values())
    assert all(translated[subject] != subject for subject in SUBSCRIPTION_SUBJECTS.values())
    for message_id, text in translated.items():
        assert re.findall(r"%\((\w+)\)s", text) == re.findall(r"%\((\w+)\)s", message_id)


@pytest.mark.parametrize("language", LANGUAGE_CODES)
@pytest.mark.parametrize("event_type", sorted(SUBJECTS))
def test_every_subject_and_body_names_the_invoice_id(language: str, event_type: str) -> None:
    subject, body = subject_and_body(event_type, language, {"invoiceId": "INV-42", "amount": "1"})

    assert "INV-42" in subject and "INV-42" in body


@pytest.mark.parametrize("language", LANGUAGE_CODES)
@pytest.mark.parametrize("event_type", sorted(SUBSCRIPTION_SUBJECTS))
def test_every_subscription_message_names_the_subscription(language: str, event_type: str) -> None:
    subscription = {"id": "SUB-42", "status": "active", "period": 7}
    subject, body = subscription_subject_and_body(event_type, language, subscription)

    assert "SUB-42" in subject and "SUB-42" in body and "7" in body
    assert "%(" not in subject + body


def test_a_subscription_message_leaves_out_what_its_event_does_not_carry() -> None:
    _subject, body = subscription_subject_and_body(
        "subscription.cancelled", "en", {"id": "SUB-1", "status": "cancelled"}
    )

    assert body.splitlines()[:3] == ["Subscription: SUB-1", "Status: cancelled", ""]


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("smtp://mail.example", SmtpServer("mail.example", 25, False, False, None, None)),
        (
            "smtp://us%40er:p%3Ass@mail.example:587?starttls=1",
            SmtpServer("mail.example", 587, False, True, "us@er", "p:ss"),
        ),
        ("smtps://u:p@mail.example", SmtpServer("mail.example", 465, True, False, "u", "p")),
    ],
)
def test_the_smtp_url(url: str, server: SmtpServer) -> None:
    assert SmtpServer.of_url(url) == server


@pytest.mark.parametrize(
    "url", ["http://mail.example", "smtp://", "smtps://mail.example?starttls=1"]
)
def test_a_bad_smtp_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        SmtpServer.of_url(url)


@given(st.text(max_size=300))
def test_an_accepted_address_is_one_plain_ascii_mailbox(text: str) -> None:
    try:
        accepted = checked_email(text)
    except InvalidRequest:
        return
    assert accepted == text and text.isascii() and text.count("@") == 1
    assert not any(c.isspace() or c in '<>(),;:"\\[]' or ord(c) < 32 for c in text)


@given(st.text(max_size=200))
def test_no_invoice_id_adds_a_header(invoice_id: str) -> None:
    subject, body = subject_and_body("invoice.paid", "en", {"invoiceId": invoice_id})
    message = compose(
        OutgoingMail("a@b.example", subject, body, "id-1"), "s@b.example", "b.example"
    )

    assert sorted(message.keys()) == [
        "Content-Transfer-Encoding",
        "Content-Type",
        "Date",
        "From",
        "MIME-Version",
        "Message-ID",
        "Subject",
        "To",
    ]
    assert "\n" not in str(message["Subject"]) and "\r" not in str(message["Subject"])


@pytest.mark.parametrize(
    "url", ["http://mail.example", "smtp://", "smtps://mail.example?starttls=1", "mail.example"]
)
def test_settings_refuse_a_bad_smtp_url(url: str) -> None:
    with pytest.raises(ValueError, match="INVOICING_SMTP_URL"):
        Settings(environment="development", smtp_url=url)


def test_the_smtp_password_is_never_shown() -> None:
    server = SmtpServer.of_url("smtp://user:hunter2@mail.example:587?starttls=1")
    settings = Settings(environment="development", smtp_url="smtp://u:hunter2@mail.example")

    assert server.password == "hunter2"
    assert "hunter2" not in repr(server) and "hunter2" not in repr(settings)


def test_a_from_with_a_display_name_sends_from_its_address() -> None:
    mailer = SmtpMailer(SmtpServer.of_url("smtp://mail.example"), "Shop <shop@b.example>", 5.0)
    message = compose(OutgoingMail("a@b.example", "s", "b", "id-1"), mailer.sender, mailer.domain)

    assert (mailer.envelope_from, mailer.domain) == ("shop@b.example", "b.example")
    assert message["From"] == "Shop <shop@b.example>"
