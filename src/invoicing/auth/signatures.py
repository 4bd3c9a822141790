"""Signature mode (spec 5.2): the canonical message and who signed it.

message = ``Service API Request Signature`` + ``\\n`` + canonical JSON, where the canonical
JSON is ``{"action","ownerAddress","timestamp","payload"}`` in that order with no whitespace
(``JSON.stringify`` output). Recovery uses eth-keys' coincurve (compiled secp256k1) backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from coincurve import PublicKey
from eth_account import Account
from eth_account.messages import encode_defunct

from invoicing.addresses import checksum_encode
from invoicing.hashing import keccak256

MESSAGE_PREFIX = "Service API Request Signature"


def canonical_json(action: str, owner_address: str, timestamp: int, payload: Any) -> str:
    body = {
        "action": action,
        "ownerAddress": owner_address,
        "timestamp": timestamp,
        "payload": payload,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def request_message(action: str, owner_address: str, timestamp: int, payload: Any) -> str:
    return MESSAGE_PREFIX + "\n" + canonical_json(action, owner_address, timestamp, payload)


def sign_request(
    private_key: str, action: str, owner_address: str, timestamp: int, payload: Any
) -> str:
    """Client side of signature mode (used by the CLI, tests and examples)."""
    message = encode_defunct(text=request_message(action, owner_address, timestamp, payload))
    return "0x" + bytes(Account.sign_message(message, private_key).signature).hex()


def recover_signer(message: str, signature: str) -> str | None:
    """Checksummed address that personal_signed ``message``, or None for a bad signature."""
    signer = _signer_bytes(message, signature)
    return None if signer is None else checksum_encode(signer)


def _signer_bytes(message: str, signature: str) -> bytes | None:
    """The 20 address bytes that personal_signed ``message``, or None.

    The usual form (0x + 65 bytes, v = 27 or 28) is recovered with coincurve directly, which
    is several times cheaper than going through eth-account's objects; any other form gets
    eth-account's own parsing, so both accept exactly the same signatures."""
    if len(signature) == 132 and signature.startswith("0x") and signature[-2:] in ("1b", "1c"):
        try:
            raw = bytes.fromhex(signature[2:])
            recoverable = raw[:64] + bytes([raw[64] - 27])
            public_key = PublicKey.from_signature_and_message(
                recoverable, _personal_message_hash(message), hasher=None
            )
        except ValueError:
            return None
        return keccak256(public_key.format(compressed=False)[1:])[12:]
    try:
        address = Account.recover_message(encode_defunct(text=message), signature=signature)
    except Exception:  # noqa: BLE001 - any malformed signature is simply "not signed"
        return None
    return bytes.fromhex(str(address)[2:])


def _personal_message_hash(message: str) -> bytes:
    """EIP-191 version 0x45 (personal_sign) hash of a text message."""
    data = message.encode()
    return keccak256(b"\x19Ethereum Signed Message:\n" + str(len(data)).encode() + data)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def _typed(value: str) -> Any:
    """A query value as JSON would write it: integers and booleans unquoted."""
    if value in ("true", "false"):
        return value == "true"
    # ASCII digits only: str.isdigit() also holds for "²", which int() refuses.
    if value.isascii() and value.isdigit() and (value == "0" or not value.startswith("0")):
        return int(value)
    return value


def payload_forms(payload: dict[str, Any], from_query: bool) -> Iterator[dict[str, Any]]:
    """The payload as sent, then the equivalent forms the server also accepts."""
    forms = [payload, _sorted(payload)]
    if from_query:
        typed = {
            key: _typed(value) if isinstance(value, str) else value
            for key, value in payload.items()
        }
        forms += [typed, _sorted(typed)]
    seen: set[str] = set()
    for form in forms:
        key = json.dumps(form, separators=(",", ":"), ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            yield form


def signed_by(
    owner_address: str,
    signature: str,
    action: str,
    timestamp: int,
    payload: dict[str, Any],
    from_query: bool,
) -> bool:
    """True when ``signature`` is the owner's over any accepted form of the request."""
    owner = owner_address.lower().removeprefix("0x")
    for form in payload_forms(payload, from_query):
        signer = _signer_bytes(request_message(action, owner_address, timestamp, form), signature)
        if signer is not None and signer.hex() == owner:
            return True
    return False
