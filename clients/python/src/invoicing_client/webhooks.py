"""Checking that a webhook came from the service, before acting on it.

Three proofs, each named by what you check it against:

- ``api_key=``: invoices created in API-key mode carry ``x-service-api-key`` with the
  owner's key (docs/integration/webhooks.md);
- ``owner_address=`` with ``request_signature=``: invoices created in signature mode carry
  ``x-service-signature``, the signature of the creation request. A signature alone proves
  nothing about a webhook (anyone who saw one can send it again), so it is compared with the
  one you sent: ``CreatedInvoice.request_signature``, stored with your order;
- ``signing_secret=`` (a ``whsec_…`` secret, or several while rotating): deliveries signed
  with ``x-service-webhook-signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``,
  one ``v1`` per active secret; the strongest proof, since it covers the exact body and a
  time (replays older than ``tolerance_s`` are refused).

Every proof given must hold. Pass the body exactly as received (bytes): a re-serialized
body does not match its HMAC.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from invoicing_client.errors import InvoicingError
from invoicing_client.models import EventEnvelope, WebhookEvent
from invoicing_client.signing import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER

__all__ = [
    "EventEnvelope",
    "WebhookEvent",
    "WebhookVerificationError",
    "signature_header",
    "verify",
]

WEBHOOK_SIGNATURE_HEADER = "x-service-webhook-signature"
EVENT_ID_HEADER = "x-service-event-id"
DEFAULT_TOLERANCE_S = 300


class WebhookVerificationError(InvoicingError):
    """The request is not a genuine webhook of the service (or not for this owner): answer
    it with a 4xx and do nothing."""


def verify(
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    api_key: str | None = None,
    owner_address: str | None = None,
    request_signature: str | Iterable[str] | None = None,
    signing_secret: str | Iterable[str] | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now_s: float | None = None,
) -> WebhookEvent | EventEnvelope:
    """The webhook's event once every given proof holds; ``WebhookVerificationError`` if not.

    ``owner_address`` (when given) must also be the event's ``ownerAddress``."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    lowered = {key.lower(): value for key, value in headers.items()}
    if api_key is None and request_signature is None and signing_secret is None:
        raise TypeError("give api_key=, owner_address= with request_signature=, or signing_secret=")
    if request_signature is not None and owner_address is None:
        raise TypeError("request_signature= needs owner_address=")
    if signing_secret is not None:
        now = time.time() if now_s is None else now_s
        _check_hmac(
            lowered.get(WEBHOOK_SIGNATURE_HEADER), raw, _many(signing_secret), now, tolerance_s
        )
    if api_key is not None:
        _check_equal(lowered.get(API_KEY_HEADER), [api_key], API_KEY_HEADER)
    if request_signature is not None:
        if lowered.get(TIMESTAMP_HEADER) is None:
            raise WebhookVerificationError(f"{TIMESTAMP_HEADER} is missing")
        _check_equal(lowered.get(SIGNATURE_HEADER), _many(request_signature), SIGNATURE_HEADER)
    return _event(raw, owner_address, lowered.get(EVENT_ID_HEADER))


def signature_header(secret: str, body: bytes, timestamp_s: int) -> str:
    """``x-service-webhook-signature`` of ``body`` signed with one secret at ``timestamp_s``
    (to test a receiver)."""
    return f"t={timestamp_s},v1={_hmac_hex(secret, timestamp_s, body)}"


def _many(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _hmac_hex(secret: str, timestamp_s: int, body: bytes) -> str:
    signed = str(timestamp_s).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def _check_equal(sent: str | None, expected: list[str], header: str) -> None:
    if sent is None:
        raise WebhookVerificationError(f"{header} is missing")
    # Every candidate compared, in constant time each.
    matches = [hmac.compare_digest(sent.encode(), value.encode()) for value in expected]
    if not any(matches):
        raise WebhookVerificationError(f"{header} does not match")


def _check_hmac(
    header: str | None, body: bytes, secrets: list[str], now_s: float, tolerance_s: int
) -> None:
    if header is None:
        raise WebhookVerificationError(f"{WEBHOOK_SIGNATURE_HEADER} is missing")
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        raise WebhookVerificationError(f"{WEBHOOK_SIGNATURE_HEADER} is malformed")
    if abs(now_s - timestamp) > tolerance_s:
        raise WebhookVerificationError(
            f"{WEBHOOK_SIGNATURE_HEADER} is {int(now_s - timestamp)} s old (over {tolerance_s})"
        )
    expected = [_hmac_hex(secret, timestamp, body) for secret in secrets]
    matches = [hmac.compare_digest(sent, mine) for sent in signatures for mine in expected]
    if not any(matches):
        raise WebhookVerificationError(f"no {WEBHOOK_SIGNATURE_HEADER} v1 matches the body")


def _event(
    raw: bytes, owner_address: str | None, event_id: str | None
) -> WebhookEvent | EventEnvelope:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise WebhookVerificationError("the body is not JSON") from exc
    if not isinstance(data, dict):
        raise WebhookVerificationError("the body is not a JSON object")
    try:
        if "type" in data and "data" in data:
            envelope = EventEnvelope.model_validate(data)
            invoice = envelope.data.get("invoice")
            owner = invoice.get("ownerAddress") if isinstance(invoice, dict) else None
            _check_owner(owner, owner_address)
            return envelope
        event = WebhookEvent.model_validate({**data, "eventId": event_id})
    except ValidationError as exc:
        raise WebhookVerificationError(f"the body is not a webhook event: {exc}") from exc
    _check_owner(event.owner_address, owner_address)
    return event


def _check_owner(sent: object, owner_address: str | None) -> None:
    if owner_address is None:
        return
    if not isinstance(sent, str) or sent.lower() != owner_address.lower():
        raise WebhookVerificationError("the event is for another ownerAddress")
