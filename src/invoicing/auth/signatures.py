"""Signature mode (docs/integration/authentication.md): the canonical message and its signer.

message = ``Service API Request Signature`` + ``\\n`` + canonical JSON, where the canonical
JSON is ``{"action","ownerAddress","timestamp","payload"}`` in that order with no whitespace
(``JSON.stringify`` output). Recovery uses eth-keys' coincurve (compiled secp256k1) backend.

Forms accepted besides the payload exactly as sent (docs/integration/authentication.md):
keys sorted recursively; for GET and DELETE, query values typed by the route's query
schema (``{"chainId":31337,"invoiceId":"1"}``) as well as all strings; and each form's
numbers written either as ``JSON.stringify`` writes them (``1e-7``, ``1e+21``) or as
Python's ``json.dumps`` does (``1e-07``), so JavaScript and Python clients both verify.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from coincurve import PublicKey
from eth_account import Account
from eth_account.messages import encode_defunct

from invoicing.addresses import checksum_encode
from invoicing.auth.jsjson import stringify
from invoicing.hashing import keccak256

MESSAGE_PREFIX = "Service API Request Signature"


def canonical_json(action: str, owner_address: str, timestamp: int, payload: Any) -> str:
    """``JSON.stringify({action, ownerAddress, timestamp, payload})``."""
    return _envelope(action, owner_address, timestamp, stringify(payload))


def _envelope(action: str, owner_address: str, timestamp: int, payload_text: str) -> str:
    head = {"action": action, "ownerAddress": owner_address, "timestamp": timestamp}
    return json.dumps(head, separators=(",", ":"), ensure_ascii=False)[:-1] + (
        ',"payload":' + payload_text + "}"
    )


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
                recoverable, personal_message_hash(message), hasher=None
            )
        except ValueError:
            return None
        return keccak256(public_key.format(compressed=False)[1:])[12:]
    try:
        address = Account.recover_message(encode_defunct(text=message), signature=signature)
    except Exception:  # noqa: BLE001 - any malformed signature is simply "not signed"
        return None
    return bytes.fromhex(str(address)[2:])


def personal_message_hash(message: str) -> bytes:
    """EIP-191 version 0x45 (personal_sign) hash of a text message."""
    data = message.encode()
    return keccak256(b"\x19Ethereum Signed Message:\n" + str(len(data)).encode() + data)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


QueryTypes = Mapping[str, str]
"""A route's query parameters and their JSON types: ``"integer"``, ``"boolean"`` or
``"string"`` (``api.inputs.query_types`` reads them from the route's query model)."""


def _typed(value: str, kind: str | None) -> Any:
    """A query value as a client holding it with the route's type would write it in JSON:
    integers in their canonical decimal form as numbers, ``true``/``false`` as booleans,
    everything else (strings, and values that do not fit their type) as sent."""
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    if kind == "integer" and _canonical_integer(value):
        return int(value)
    return value


def _canonical_integer(value: str) -> bool:
    # ASCII digits only (str.isdigit() also holds for "²"), no leading zeros or "+".
    digits = value.removeprefix("-")
    return (
        0 < len(digits) <= 20
        and digits.isascii()
        and digits.isdigit()
        and (digits == "0" or not digits.startswith("0"))
        and value != "-0"
    )


def payload_forms(
    payload: dict[str, Any], query_types: QueryTypes | None = None
) -> Iterator[dict[str, Any]]:
    """The payload as sent, then the equivalent forms the server also accepts: keys
    sorted; for a query (``query_types`` given), values typed by the route's schema."""
    forms = [payload, _sorted(payload)]
    if query_types is not None:
        typed = {
            key: _typed(value, query_types.get(key)) if isinstance(value, str) else value
            for key, value in payload.items()
        }
        forms += [typed, _sorted(typed)]
    yield from forms


def payload_texts(payload: dict[str, Any], query_types: QueryTypes | None = None) -> Iterator[str]:
    """The JSON texts of every accepted form, each once: Python's ``json.dumps`` text first
    (the C encoder; the same as ``JSON.stringify`` for nearly every request), then
    ``JSON.stringify``'s where it differs. Lazy: a signature that matches the first text
    costs one serialization."""
    seen: set[str] = set()
    for form in payload_forms(payload, query_types):
        for write in (_python_text, stringify):
            text = write(form)
            if text not in seen:
                seen.add(text)
                yield text


def _python_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def signed_by(
    owner_address: str,
    signature: str,
    action: str,
    timestamp: int,
    payload: dict[str, Any],
    query_types: QueryTypes | None = None,
) -> bool:
    """True when ``signature`` is the owner's over any accepted form of the request
    (``query_types``: the route's query parameter types, for GET and DELETE)."""
    owner = owner_address.lower().removeprefix("0x")
    for text in payload_texts(payload, query_types):
        message = MESSAGE_PREFIX + "\n" + _envelope(action, owner_address, timestamp, text)
        signer = _signer_bytes(message, signature)
        if signer is not None and signer.hex() == owner:
            return True
    return False
