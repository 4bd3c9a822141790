"""The JSON of a JSON-RPC request, with long calldata spliced in as it is.

A monitor pass sends an ``eth_call`` per 50M gas of escrows: about 900 KB of hex each, a few
hundred calls per pass at ten million watched invoices. ``json.dumps`` scans every character
of a string for what to escape, which cost 5 ms per call (seconds per pass); hex digits need
no escaping, so calldata the service encoded itself (``HexData``) is left out of the scan and
put back between its quotes.
"""

from __future__ import annotations

import json
from typing import Any

JSON_HEADERS = {"content-type": "application/json"}
# Shorter strings are encoded as usual.
SPLICE_MIN = 4096
_MARK = "\x00calldata\x00"
_MARK_JSON = json.dumps(_MARK)


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
    text = json.dumps(marked, separators=(",", ":"), allow_nan=False)
    parts = text.split(_MARK_JSON)
    if not spliced or len(parts) != len(spliced) + 1:
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
    pieces = [parts[0]]
    for data, after in zip(spliced, parts[1:], strict=True):
        pieces += ['"', data, '"', after]
    return "".join(pieces).encode()
