"""``invoicing_client.webhooks.verify`` on deliveries built here: the signed-webhook header
(``t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``) is computed with this
file's own HMAC code, not the client's."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from invoicing_client import webhooks
from invoicing_client.webhooks import EventEnvelope, WebhookVerificationError, verify

OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
NOW = 1_795_463_933
BODY = json.dumps(
    {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "invoiceId": "order-1",
        "paymentAddress": "0x8C67C726B74AD0f1e397A5a4276a1f0d8214b884",
        "salt": "0x" + "11" * 32,
        "amount": "0.25",
        "tokenAddress": None,
        "status": "paid",
        "paid": True,
        "paidAt": 1795463933262,
        "requiredRaw": "250000000000000000",
        "balanceRaw": "250000000000000000",
        "balance": 0.25,
        "updatedAt": 1795463933262,
        "payments": [
            {
                "txHash": "0x" + "ab" * 32,
                "from": "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
                "amountRaw": "250000000000000000",
                "tokenAddress": None,
                "blockNumber": 16,
            }
        ],
    },
    separators=(",", ":"),
).encode()


def v1(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signed(body: bytes, timestamp: int, *secrets: str) -> dict[str, str]:
    parts = [f"t={timestamp}"] + [f"v1={v1(secret, timestamp, body)}" for secret in secrets]
    return {"X-Service-Webhook-Signature": ",".join(parts), "x-service-event-id": "ev-1"}


def test_a_signed_delivery_verifies_and_gives_the_event() -> None:
    event = verify(signed(BODY, NOW, "whsec_a"), BODY, signing_secret="whsec_a", now_s=NOW + 5)

    assert isinstance(event, webhooks.WebhookEvent)
    assert (event.invoice_id, event.required_raw, event.balance_raw) == (
        "order-1", 25 * 10**16, 25 * 10**16,
    )  # fmt: skip
    assert event.event_id == "ev-1"
    assert event.payments is not None
    (payment,) = event.payments
    assert (payment.from_, payment.amount_raw, payment.block_number) == (
        "0x976EA74026E726554dB657fA54763abd0C3a0aa9", 25 * 10**16, 16,
    )  # fmt: skip
    assert webhooks.signature_header("whsec_a", BODY, NOW) == (
        f"t={NOW},v1={v1('whsec_a', NOW, BODY)}"
    )


def test_rotation_any_active_secret_matches() -> None:
    headers = signed(BODY, NOW, "whsec_old", "whsec_new")
    for mine in ("whsec_old", "whsec_new", ["whsec_unrelated", "whsec_new"]):
        assert verify(headers, BODY, signing_secret=mine, now_s=NOW)


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        (signed(BODY, NOW, "whsec_b"), BODY, "no x-service-webhook-signature v1 matches"),
        (signed(BODY, NOW, "whsec_a"), BODY.replace(b"0.25", b"2.50"), "v1 matches"),
        (signed(BODY, NOW - 301, "whsec_a"), BODY, "301 s old"),
        (signed(BODY, NOW + 301, "whsec_a"), BODY, "-301 s old"),
        ({}, BODY, "x-service-webhook-signature is missing"),
        ({"x-service-webhook-signature": "v1=abc"}, BODY, "malformed"),
        ({"x-service-webhook-signature": f"t={NOW}"}, BODY, "malformed"),
    ],
)
def test_a_bad_signed_delivery_is_refused(
    headers: dict[str, str], body: bytes, message: str
) -> None:
    with pytest.raises(WebhookVerificationError, match=message):
        verify(headers, body, signing_secret="whsec_a", now_s=NOW)


def test_the_tolerance_is_inclusive_and_adjustable() -> None:
    assert verify(signed(BODY, NOW - 300, "whsec_a"), BODY, signing_secret="whsec_a", now_s=NOW)
    with pytest.raises(WebhookVerificationError):
        verify(
            signed(BODY, NOW - 60, "whsec_a"), BODY, signing_secret="whsec_a", now_s=NOW,
            tolerance_s=30,
        )  # fmt: skip


def test_every_proof_given_must_hold() -> None:
    headers = {**signed(BODY, NOW, "whsec_a"), "x-service-api-key": "sk_right"}
    assert verify(headers, BODY, api_key="sk_right", signing_secret="whsec_a", now_s=NOW)
    with pytest.raises(WebhookVerificationError, match="x-service-api-key does not match"):
        verify(headers, BODY, api_key="sk_wrong", signing_secret="whsec_a", now_s=NOW)
    with pytest.raises(WebhookVerificationError, match="v1 matches"):
        verify(headers, BODY, api_key="sk_right", signing_secret="whsec_b", now_s=NOW)
    with pytest.raises(WebhookVerificationError, match="another ownerAddress"):
        verify(headers, BODY, api_key="sk_right", owner_address="0x" + "12" * 20)


def test_signature_mode_compares_the_creation_signature() -> None:
    headers = {"x-service-signature": "0xabc", "x-service-timestamp": "1795463933000"}
    event = verify(headers, BODY, owner_address=OWNER.lower(), request_signature="0xabc")
    assert isinstance(event, webhooks.WebhookEvent)
    with pytest.raises(WebhookVerificationError, match="does not match"):
        verify(headers, BODY, owner_address=OWNER, request_signature="0xabd")
    with pytest.raises(WebhookVerificationError, match="x-service-timestamp is missing"):
        verify(
            {"x-service-signature": "0xabc"}, BODY, owner_address=OWNER, request_signature="0xabc"
        )
    with pytest.raises(TypeError, match="needs owner_address"):
        verify(headers, BODY, request_signature="0xabc")


def test_no_proof_at_all_is_a_usage_error() -> None:
    with pytest.raises(TypeError, match="give api_key="):
        verify({"x-service-api-key": "sk_x"}, BODY, owner_address=OWNER)


def test_an_event_envelope_of_a_registered_endpoint() -> None:
    body = json.dumps(
        {
            "id": "ev_1",
            "type": "invoice.expired",
            "createdAt": 1795463933262,
            "data": {"invoice": {"ownerAddress": OWNER, "status": "expired"}},
        }
    ).encode()
    event = verify(signed(body, NOW, "whsec_a"), body, signing_secret="whsec_a", now_s=NOW,
                   owner_address=OWNER)  # fmt: skip
    assert isinstance(event, EventEnvelope)
    assert (event.id, event.type, event.data["invoice"]["status"]) == (
        "ev_1", "invoice.expired", "expired",
    )  # fmt: skip


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"ownerAddress": "0x"}'])
def test_a_body_that_is_not_an_event_is_refused(body: bytes) -> None:
    with pytest.raises(WebhookVerificationError):
        verify(signed(body, NOW, "whsec_a"), body, signing_secret="whsec_a", now_s=NOW)
