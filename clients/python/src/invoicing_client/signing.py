"""Signature mode (docs/integration/authentication.md): the canonical request message and its
EIP-191 signature.

message = ``Service API Request Signature`` + newline + canonical JSON, where the canonical
JSON is ``{"action","ownerAddress","timestamp","payload"}`` in that order, no whitespace
(what JavaScript's ``JSON.stringify`` writes). ``payload`` is the POST body without
``ownerAddress`` in the order sent, or the query parameters without ``ownerAddress`` in URL
order; this client sends query values all as strings, a form the service always accepts.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data

MESSAGE_PREFIX = "Service API Request Signature"

API_KEY_HEADER = "x-service-api-key"
SIGNATURE_HEADER = "x-service-signature"
TIMESTAMP_HEADER = "x-service-timestamp"


def canonical_json(action: str, owner_address: str, timestamp_ms: int, payload: Any) -> str:
    body = {
        "action": action,
        "ownerAddress": owner_address,
        "timestamp": timestamp_ms,
        "payload": payload,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def request_message(action: str, owner_address: str, timestamp_ms: int, payload: Any) -> str:
    return MESSAGE_PREFIX + "\n" + canonical_json(action, owner_address, timestamp_ms, payload)


def sign_request(
    private_key: str, action: str, owner_address: str, timestamp_ms: int, payload: Any
) -> str:
    """The ``x-service-signature`` of one request: 0x + 65 bytes (r, s, v = 27/28)."""
    message = encode_defunct(text=request_message(action, owner_address, timestamp_ms, payload))
    signed = Account.sign_message(message, private_key)
    return "0x" + bytes(signed.signature).hex()


def sign_typed_data(private_key: str, typed_data: dict[str, Any]) -> str:
    """An EIP-712 signature (0x + 65 bytes) of full typed data."""
    signed = Account.sign_message(encode_typed_data(full_message=typed_data), private_key)
    return "0x" + bytes(signed.signature).hex()


class Timestamps:
    """Strictly increasing millisecond timestamps: the service accepts each (owner, timestamp)
    once, so two requests of one client never share one, even within a millisecond."""

    def __init__(self) -> None:
        self._last_ms = 0
        self._lock = threading.Lock()

    def next_ms(self) -> int:
        with self._lock:
            self._last_ms = max(self._last_ms + 1, time.time_ns() // 1_000_000)
            return self._last_ms


class RequestSigner:
    """Signs requests for one owner wallet with its private key."""

    def __init__(self, private_key: str, owner_address: str) -> None:
        account = Account.from_key(private_key)
        if account.address.lower() != owner_address.lower():
            raise ValueError(
                f"private_key belongs to {account.address}, not to owner_address {owner_address}"
            )
        self._private_key = private_key
        self.owner_address = owner_address
        self._timestamps = Timestamps()

    def __repr__(self) -> str:  # never the key
        return f"RequestSigner(owner_address={self.owner_address!r})"

    def headers(self, action: str, payload: dict[str, Any]) -> dict[str, str]:
        timestamp_ms = self._timestamps.next_ms()
        signature = sign_request(
            self._private_key, action, self.owner_address, timestamp_ms, payload
        )
        return {SIGNATURE_HEADER: signature, TIMESTAMP_HEADER: str(timestamp_ms)}

    def sign_typed_data(self, typed_data: dict[str, Any]) -> str:
        return sign_typed_data(self._private_key, typed_data)
