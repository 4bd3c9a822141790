"""x402 version 2 (https://github.com/coinbase/x402, specs/x402-specification-v2.md and
specs/transports-v2/http.md) for invoices in an EIP-3009 token: the ``exact`` scheme on EVM.

A GET of an invoice's ``x402Url`` without payment answers 402 with ``PAYMENT-REQUIRED``
(base64 of a ``PaymentRequired``: one ``accepts`` entry, scheme ``exact``, network
``eip155:<chainId>``, ``amount`` the raw amount due, ``asset`` the token, ``payTo`` the
escrow, ``maxTimeoutSeconds``, ``extra`` the token's EIP-712 name and version). The client
retries with ``PAYMENT-SIGNATURE`` (base64 of a ``PaymentPayload``): its authorization goes
through ``gasless.service`` like the payment page's, and the answer carries
``PAYMENT-RESPONSE`` (base64 of a ``SettleResponse``).

Everything here is parsed from strangers: headers are strict base64 of a JSON object (no
duplicate keys, no floats, bounded size), and every amount is an integer carried as a
decimal string, end to end.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from invoicing.addresses import normalize_address
from invoicing.chain.config import TokenConfig
from invoicing.chain.eip3009 import Authorization
from invoicing.errors import (
    AuthorizationUsed,
    GaslessUnavailable,
    InsufficientBalance,
    InvalidAuthorization,
    InvalidRequest,
    InvoiceNotPayable,
    ServiceError,
)

X402_VERSION = 2
SCHEME = "exact"
PAYMENT_REQUIRED = "PAYMENT-REQUIRED"
PAYMENT_SIGNATURE = "PAYMENT-SIGNATURE"
PAYMENT_RESPONSE = "PAYMENT-RESPONSE"
# A payload with a contract wallet's signature stays far under this.
MAX_HEADER_CHARS = 16_384
# The client signs validBefore = now + maxTimeoutSeconds: inside the window the service takes.
MAX_TIMEOUT_SECONDS = 300
_UINT = re.compile(r"^(0|[1-9][0-9]{0,77})$")
_HEX32 = re.compile(r"^0x[0-9a-fA-F]{64}$")
_HEX = re.compile(r"^0x(?:[0-9a-fA-F]{2})*$")
_NETWORK = re.compile(r"^eip155:([1-9][0-9]{0,18})$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


class X402Invalid(InvalidRequest):
    """A header or payload that is not x402 v2 ``exact`` on EVM (``reason``: the error code
    the x402 specification gives it)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, {"reason": reason})
        self.reason = reason


def encode_header(value: dict[str, Any]) -> str:
    """Base64 of compact JSON, as the x402 HTTP transport carries its objects."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(text.encode()).decode("ascii")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise X402Invalid("invalid_payload", f"duplicate key {key!r}")
        found[key] = value
    return found


def _no_float(text: str) -> Any:
    raise X402Invalid("invalid_payload", "numbers with a fraction or exponent are refused")


def decode_header(value: str) -> dict[str, Any]:
    """The JSON object of a base64 header (standard alphabet, padding optional)."""
    value = value.strip()
    if len(value) > MAX_HEADER_CHARS or not _BASE64.fullmatch(value):
        raise X402Invalid("invalid_payload", "the header is not base64 of at most 16 KiB")
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        data = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_no_duplicates,
            parse_float=_no_float,
            parse_constant=_no_float,
        )
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
        raise X402Invalid("invalid_payload", "the header is not base64 of JSON") from None
    if not isinstance(data, dict):
        raise X402Invalid("invalid_payload", "the header is not a JSON object")
    return data


@dataclass(frozen=True)
class Requirements:
    """One ``accepts`` entry (PaymentRequirements) of the ``exact`` scheme on EVM."""

    chain_id: int
    amount: int
    asset: str
    pay_to: str
    max_timeout_seconds: int
    name: str
    version: str

    @property
    def network(self) -> str:
        return f"eip155:{self.chain_id}"

    def as_json(self) -> dict[str, Any]:
        return {
            "scheme": SCHEME,
            "network": self.network,
            "amount": str(self.amount),
            "asset": self.asset,
            "payTo": self.pay_to,
            "maxTimeoutSeconds": self.max_timeout_seconds,
            "extra": {"name": self.name, "version": self.version},
        }


def requirements_for(chain_id: int, token: TokenConfig, pay_to: str, amount: int) -> Requirements:
    assert token.eip3009 is not None
    domain = token.eip3009
    return Requirements(
        chain_id, amount, token.address, pay_to, MAX_TIMEOUT_SECONDS, domain.name, domain.version
    )


def payment_required(
    requirements: Requirements, url: str, description: str, error: str | None
) -> dict[str, Any]:
    """A ``PaymentRequired`` object for the ``PAYMENT-REQUIRED`` header."""
    body: dict[str, Any] = {"x402Version": X402_VERSION}
    if error is not None:
        body["error"] = error
    body["resource"] = {"url": url, "description": description, "mimeType": "application/json"}
    body["accepts"] = [requirements.as_json()]
    return body


@dataclass(frozen=True)
class Payment:
    """A ``PaymentPayload`` of the ``exact`` scheme on EVM: what the client accepted and its
    signed authorization."""

    accepted: Requirements
    authorization: Authorization
    signature: str


def _text(data: dict[str, Any], key: str, pattern: re.Pattern[str], reason: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise X402Invalid(reason, f"{key} is missing or malformed")
    return value


def _address(data: dict[str, Any], key: str, reason: str = "invalid_payload") -> str:
    value = data.get(key)
    try:
        if not isinstance(value, str):
            raise ValueError
        return normalize_address(value)
    except ValueError:
        raise X402Invalid(reason, f"{key} is not an address") from None


def _object(data: dict[str, Any], key: str, reason: str = "invalid_payload") -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise X402Invalid(reason, f"{key} is missing or not an object")
    return value


def parse_requirements(data: dict[str, Any]) -> Requirements:
    """A ``PaymentRequirements`` object of the ``exact`` scheme on an ``eip155`` network."""
    if data.get("scheme") != SCHEME:
        raise X402Invalid("invalid_scheme", "only the exact scheme is supported")
    network = data.get("network")
    match = _NETWORK.fullmatch(network) if isinstance(network, str) else None
    if match is None:
        raise X402Invalid("invalid_network", "network must be eip155:<chainId>")
    reason = "invalid_payment_requirements"
    amount = int(_text(data, "amount", _UINT, reason))
    timeout = data.get("maxTimeoutSeconds")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 < timeout < 2**31:
        raise X402Invalid(reason, "maxTimeoutSeconds must be a positive integer")
    extra = _object(data, "extra", reason)
    name, version = extra.get("name"), extra.get("version")
    if not isinstance(name, str) or not isinstance(version, str) or len(name + version) > 200:
        raise X402Invalid(reason, "extra must carry the token's EIP-712 name and version")
    asset, pay_to = _address(data, "asset", reason), _address(data, "payTo", reason)
    return Requirements(int(match[1]), amount, asset, pay_to, timeout, name, version)


def parse_payment(data: dict[str, Any]) -> Payment:
    """A ``PaymentPayload`` (x402 v2) of the ``exact`` scheme with an EIP-3009 authorization."""
    if data.get("x402Version") != X402_VERSION or isinstance(data.get("x402Version"), bool):
        raise X402Invalid("invalid_x402_version", "x402Version must be 2")
    accepted = parse_requirements(_object(data, "accepted"))
    payload = _object(data, "payload")
    signature = _text(payload, "signature", _HEX, "invalid_exact_evm_payload_signature")
    if len(signature) > 2 + 2 * 2048:
        raise X402Invalid("invalid_exact_evm_payload_signature", "the signature is too long")
    auth = _object(payload, "authorization")
    authorization = Authorization(
        _address(auth, "from"),
        _address(auth, "to"),
        int(_text(auth, "value", _UINT, "invalid_payload")),
        int(_text(auth, "validAfter", _UINT, "invalid_payload")),
        int(_text(auth, "validBefore", _UINT, "invalid_payload")),
        bytes.fromhex(_text(auth, "nonce", _HEX32, "invalid_payload")[2:]),
    )
    return Payment(accepted, authorization, signature)


def check_accepted(payment: Payment, requirements: Requirements) -> None:
    """What the client accepted is what is required (token, network, amount, payee)."""
    accepted = payment.accepted
    if accepted.chain_id != requirements.chain_id:
        raise X402Invalid("invalid_network", "network is not the one required")
    if accepted.asset != requirements.asset or (accepted.name, accepted.version) != (
        requirements.name,
        requirements.version,
    ):
        raise X402Invalid("invalid_payment_requirements", "asset is not the one required")
    if accepted.pay_to != requirements.pay_to:
        raise X402Invalid("invalid_exact_evm_payload_recipient_mismatch", "payTo differs")
    if accepted.amount != requirements.amount:
        raise X402Invalid(
            "invalid_exact_evm_payload_authorization_value_mismatch", "amount differs"
        )


_FIELD_REASONS = {
    "value": "invalid_exact_evm_payload_authorization_value_mismatch",
    "to": "invalid_exact_evm_payload_recipient_mismatch",
    "validAfter": "invalid_exact_evm_payload_authorization_valid_after",
    "validBefore": "invalid_exact_evm_payload_authorization_valid_before",
    "signature": "invalid_exact_evm_payload_signature",
    "chainId": "invalid_network",
    "tokenAddress": "invalid_payment_requirements",
}


def reason_of(error: ServiceError) -> str:
    """The x402 error code (specs/x402-specification-v2.md, "Error Codes") of a refusal."""
    if isinstance(error, X402Invalid):
        return error.reason
    if isinstance(error, InsufficientBalance):
        return "insufficient_funds"
    if isinstance(error, InvalidAuthorization):
        field = (error.details or {}).get("field")
        return _FIELD_REASONS.get(str(field), "invalid_transaction_state")
    if isinstance(error, (AuthorizationUsed, InvoiceNotPayable)):
        return "invalid_transaction_state"
    if isinstance(error, GaslessUnavailable):
        return "invalid_scheme"
    return "invalid_payload"
