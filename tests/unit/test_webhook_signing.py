"""The webhook signature header, checked with this test's own HMAC code."""

from __future__ import annotations

import hashlib
import hmac
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from invoicing.auth.api_keys import API_KEY
from invoicing.auth.secrets import ServerSecrets
from invoicing.notifications.claims import ClaimedEvent
from invoicing.notifications.client import Delivery
from invoicing.notifications.signing import (
    WEBHOOK_SECRET,
    WebhookOptions,
    signature_header,
)

BODY = b'{"invoiceId":"1","status":"paid","balance":1.5}'


def secrets(*values: str) -> list[SecretStr]:
    return [SecretStr(value) for value in values]


def expected(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def test_one_v1_per_secret_in_order_over_the_raw_body() -> None:
    header = signature_header(secrets("whsec_old", "whsec_new"), 1_760_000_000, BODY)

    assert header == (
        "t=1760000000,"
        f"v1={expected('whsec_old', 1_760_000_000, BODY)},"
        f"v1={expected('whsec_new', 1_760_000_000, BODY)}"
    )


def test_a_known_vector() -> None:
    # Computed once with: printf '1700000000.{}' | openssl dgst -sha256 -hmac whsec_test
    assert signature_header(secrets("whsec_test"), 1_700_000_000, b"{}") == (
        "t=1700000000,v1=35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91"
    )


@given(
    st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=300)), min_size=1, max_size=4),
)
def test_every_message_is_signed_on_its_own(
    values: list[str], messages: list[tuple[int, bytes]]
) -> None:
    # Each secret's key is set up once per process: signing one message after another, in
    # any order and with secrets shared between calls, must give each message's own HMAC.
    for timestamp, body in messages + messages[::-1]:
        header = signature_header(secrets(*values), timestamp, body)

        assert header == f"t={timestamp}," + ",".join(
            f"v1={expected(value, timestamp, body)}" for value in values
        )


def test_no_secrets_no_header() -> None:
    assert signature_header([], 1_760_000_000, BODY) is None


def test_one_changed_byte_changes_the_signature() -> None:
    signed = signature_header(secrets("whsec_a"), 1, BODY)
    tampered = signature_header(secrets("whsec_a"), 1, BODY.replace(b"1.5", b"2.5"))

    assert signed != tampered


def test_secrets_decrypt_only_under_the_server_secret_that_stored_them() -> None:
    stored = WEBHOOK_SECRET.seal(
        SecretStr("whsec_abc"), ServerSecrets(SecretStr("server-secret-one-" * 2))
    )

    assert "whsec_abc" not in stored
    assert WEBHOOK_SECRET.unseal(
        stored, ServerSecrets(SecretStr("server-secret-one-" * 2))
    ) == SecretStr("whsec_abc")
    assert WEBHOOK_SECRET.unseal(stored, ServerSecrets(SecretStr("server-secret-two-" * 2))) is None
    assert (
        API_KEY.unseal(stored, ServerSecrets(SecretStr("server-secret-one-" * 2))) is None
    )  # another kind


def docs_verifier() -> Callable[..., bool]:
    """``verify_webhook`` exactly as the webhooks page's "Signed deliveries" shows it."""
    page = Path(__file__).resolve().parents[2] / "docs/integration/webhooks.md"
    section = page.read_text().split("## Signed deliveries", 1)[1]
    code = textwrap.dedent(section.split("```python\n", 1)[1].split("```", 1)[0])
    namespace: dict[str, Any] = {}
    exec(compile(code, str(page), "exec"), namespace)  # our own docs, not input
    return cast(Callable[..., bool], namespace["verify_webhook"])


def test_the_docs_example_accepts_our_header_and_nothing_else() -> None:
    verify = docs_verifier()
    now_s = int(time.time())
    header = signature_header(secrets("whsec_old", "whsec_new"), now_s, BODY)
    assert header is not None

    assert verify(BODY, header, "whsec_old") is True
    assert verify(BODY, header, "whsec_new") is True
    assert verify(BODY, header, "whsec_other") is False
    assert verify(BODY + b" ", header, "whsec_new") is False
    stale = signature_header(secrets("whsec_new"), now_s - 301, BODY)
    assert stale is not None and verify(BODY, stale, "whsec_new") is False


def test_secrets_stay_out_of_reprs() -> None:
    options = WebhookOptions(api_key_header=False, secrets=(SecretStr("whsec_hidden"),))
    hidden = (SecretStr("whsec_hidden"),)
    event = ClaimedEvent("e", 1, "h:443", Delivery("https://h/", b"{}", {}), hidden)

    assert "whsec_hidden" not in repr(options)
    assert "whsec_hidden" not in repr(event)
