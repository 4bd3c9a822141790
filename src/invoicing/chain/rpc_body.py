"""JSON-RPC bodies as JSON: the request with long calldata spliced in as it is, and the
common answer read without a scan of its result.

A monitor pass sends an ``eth_call`` per 50M gas of escrows: about 900 KB of hex each way, a
few hundred calls per pass at ten million watched invoices. ``json.dumps`` scans every
character of a string for what to escape, which cost 5 ms per call (seconds per pass); hex
digits need no escaping, so calldata the service encoded itself (``HexData``) is left out of
the scan and put back between its quotes. The answer, a stranger's bytes, is read by
``json.loads`` unless it is exactly the compact ``{"jsonrpc":"2.0","id":N,"result":"..."}``
whose result holds no character that JSON would unescape: then it is cut out as it is
(``decode_answer`` answers what ``json.loads`` would, a test holds them together).
"""

from __future__ import annotations

import json
import re
from typing import Any

JSON_HEADERS = {"content-type": "application/json"}
# Shorter strings are encoded as usual.
SPLICE_MIN = 4096
_MARK = "\x00calldata\x00"
_MARK_JSON = json.dumps(_MARK)
# json.dumps(separators=(",", ":"), allow_nan=False), built once: ``json.dumps`` with options
# builds an encoder at every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class HexData(str):
    """A ``0x`` hex string the service made from bytes (``bytes.hex``): safe in JSON as is."""

    __slots__ = ()


def encode_request(body: Any) -> bytes:
    """``body`` as compact JSON (UTF-8), as ``json.dumps`` would write it."""
    spliced: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, HexData) and len(value) >= SPLICE_MIN:
            spliced.append(value)
            return _MARK
        if isinstance(value, dict):
            return {key: mark(item) for key, item in value.items()}
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value

    marked = mark(body)
    text = _COMPACT.encode(marked)
    parts = text.split(_MARK_JSON)
    if not spliced or len(parts) != len(spliced) + 1:
        return _COMPACT.encode(body).encode()
    pieces = [parts[0]]
    for data, after in zip(spliced, parts[1:], strict=True):
        pieces += ['"', data, '"', after]
    return "".join(pieces).encode()


_ANSWER_HEAD = re.compile(rb'\{"jsonrpc":"2\.0","id":(0|[1-9][0-9]{0,17}),"result":"')


def decode_answer(content: bytes) -> Any:
    """The JSON of an answer (ValueError when it is not JSON)."""
    head = _ANSWER_HEAD.match(content)
    if head is not None and content.endswith(b'"}'):
        result = content[head.end() : -2]
        # ASCII letters and digits (hex: "0x..."), checked by one C loop (``isprintable``
        # took 10 ms per 900 KB answer), are a JSON string as they are.
        if result.isalnum():
            return {"jsonrpc": "2.0", "id": int(head.group(1)), "result": result.decode("ascii")}
        # Printable ASCII without a quote or a backslash is a JSON string as it is.
        if result.isascii() and b'"' not in result and b"\\" not in result:
            text = result.decode("ascii")
            if text.isprintable():
                return {"jsonrpc": "2.0", "id": int(head.group(1)), "result": text}
    return json.loads(content)
