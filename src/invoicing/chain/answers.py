"""What a JSON-RPC answer means: the call's own error, a provider's refusal, a quantity.

A JSON-RPC error that is the call's own answer becomes :class:`RpcError` (the client never
retries it), and a contract revert during ``eth_call``/``eth_estimateGas`` becomes
:class:`ContractRevert` carrying the revert data. The errors that say the provider (not the
call) failed (rate limits, a block it does not have yet) are told apart by
:func:`provider_refused`: the client (``chain.rpc``) asks another URL. A quantity is read
strictly (:func:`quantity`), whatever a provider sends.
"""

from __future__ import annotations

from typing import Any

from invoicing.errors import ChainUnavailable

# JSON-RPC errors about the provider, not the call: another URL may answer.
PROVIDER_ERROR_CODES = {-32005, 429}
PROVIDER_ERROR_WORDS = ("header not found", "unknown block", "rate limit", "too many requests")


class RpcError(Exception):
    """The node answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"rpc error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class ContractRevert(RpcError):
    """A call or gas estimate reverted; ``revert_data`` holds the raw revert bytes."""

    def __init__(self, code: int, message: str, revert_data: bytes) -> None:
        super().__init__(code, message, "0x" + revert_data.hex())
        self.revert_data = revert_data


def _revert_data(error: dict[str, Any]) -> bytes | None:
    message = str(error.get("message", ""))
    data = error.get("data")
    if isinstance(data, dict):
        data = data.get("data")
    if isinstance(data, str) and data.startswith("0x"):
        return bytes.fromhex(data[2:])
    if "revert" in message.lower():
        return b""
    return None


def raise_for_error(error: dict[str, Any]) -> None:
    """Raise the JSON-RPC error object ``error`` as :class:`ContractRevert` (a revert) or
    :class:`RpcError`."""
    code = int(error.get("code", -32000))
    message = str(error.get("message", ""))
    revert = _revert_data(error)
    if revert is not None:
        raise ContractRevert(code, message, revert)
    raise RpcError(code, message, error.get("data"))


def provider_refused(error: Any) -> bool:
    """Whether a JSON-RPC error object says the provider failed, not the call."""
    if not isinstance(error, dict):
        return False
    message = str(error.get("message", "")).lower()
    return error.get("code") in PROVIDER_ERROR_CODES or any(
        word in message for word in PROVIDER_ERROR_WORDS
    )


def quantity(value: Any) -> int:
    """A JSON-RPC quantity (``0x``-prefixed hex, no sign, at most 256 bits) as an int;
    ValueError for anything else a provider may send."""
    if not isinstance(value, str) or not value[:2].lower() == "0x" or not 2 < len(value) <= 66:
        raise ValueError("not a JSON-RPC quantity")
    digits = value[2:]
    if not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError("not a JSON-RPC quantity")
    return int(digits, 16)


def batch_results(first: int, count: int, answers: Any, return_errors: bool) -> list[Any]:
    """The results of a JSON-RPC batch whose ids run from ``first``, in order: an item's
    JSON-RPC error raised, or with ``return_errors`` put in its place as the RpcError;
    ChainUnavailable when the answer is not such a batch."""
    if not isinstance(answers, list):
        raise ChainUnavailable("RPC sent a malformed batch answer")
    by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
    results: list[Any] = []
    for i in range(count):
        answer = by_id.get(first + i)
        if answer is None:
            raise ChainUnavailable("RPC dropped a batch item")
        if "error" in answer:
            try:
                raise_for_error(answer["error"])
            except RpcError as exc:
                if not return_errors:
                    raise
                results.append(exc)
                continue
        results.append(answer.get("result"))
    return results
