"""Reading request input exactly as sent (signature mode signs the raw body/query)."""

from __future__ import annotations

import functools
import json
import math
from typing import Annotated, Any, TypeVar

from fastapi import Request
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)

from invoicing.addresses import normalize_address
from invoicing.errors import InvalidRequest, PayloadTooLarge

MAX_BODY_BYTES = 64 * 1024
UINT256_MAX = 2**256 - 1


def decimal_digits(value: str) -> int:
    """A uint256 sent as a decimal string (nonces, deadlines, raw amounts): ASCII digits only
    (``str.isdigit`` also takes other scripts' digits), at most 78 of them."""
    if not value.isascii() or not value.isdigit() or len(value) > 78:
        raise ValueError("must be a decimal string of digits (a uint256)")
    return int(value)


def _uint256_string(value: Any) -> Any:
    """Raw amounts, nonces and deadlines of signed requests: decimal strings, never JSON
    numbers."""
    if not isinstance(value, str):
        raise ValueError("must be a decimal string of digits (a uint256)")
    return decimal_digits(value)


def _uint256(value: Any) -> Any:
    """A decimal string (as the docs send it) or a non-negative JSON integer."""
    if isinstance(value, bool):
        raise ValueError("must be a decimal string")
    if isinstance(value, str):
        return decimal_digits(value)
    return value


_UINT256_SCHEMA = {"type": "string", "pattern": "^[0-9]{1,78}$", "description": "uint256"}
# A uint256 as a decimal string: the one input type of the API, the page and the dashboard.
DecimalString = Annotated[
    int,
    BeforeValidator(_uint256_string),
    Field(ge=0, le=UINT256_MAX),
    WithJsonSchema(_UINT256_SCHEMA),
]
# The same, where a route also takes a JSON integer (SetFee and SetPayout's nonce, deadline).
DecimalUint = Annotated[
    int,
    BeforeValidator(_uint256),
    Field(ge=0, le=UINT256_MAX),
    WithJsonSchema(_UINT256_SCHEMA),
]

Model = TypeVar("Model", bound=BaseModel)


def checksum_address(value: str) -> str:
    """Accept a 0x address in any case; mixed case must be a valid EIP-55 checksum."""
    if not isinstance(value, str):
        raise ValueError("must be a 0x-prefixed 20-byte hex address")
    return normalize_address(value)


Address = Annotated[
    str,
    AfterValidator(checksum_address),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^0x[0-9a-fA-F]{40}$",
            "description": "0x address; mixed case must be a valid EIP-55 checksum.",
        }
    ),
]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidRequest(f"duplicate JSON key {key!r}")
        result[key] = value
    return result


async def json_body(request: Request, max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The body as a JSON object with its key order kept; 400/413 on anything else."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is over {max_bytes} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise PayloadTooLarge(f"request body is over {max_bytes} bytes")
    content_type = request.headers.get("content-type", "")
    if "json" not in content_type.lower():
        raise InvalidRequest("Content-Type must be application/json")
    try:
        data = _DECODER.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, InvalidRequest):
            raise
        raise InvalidRequest("request body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    _refuse_nul(data)
    return data


def _no_constant(name: str) -> Any:
    raise InvalidRequest(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidRequest(f"number {text[:40]} is out of range")
    return value


# One decoder per process: ``json.loads`` with hooks builds a decoder at every call, which
# cost about as much as decoding a create's body.
_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite_float
)


def _refuse_nul(value: Any) -> None:
    """NUL characters and lone surrogates (``"\\ud800"``) are refused everywhere: PostgreSQL
    text cannot hold them and they have no UTF-8 form to sign."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidRequest("strings must not contain NUL characters")
        if not value.isascii() and _has_surrogate(value):
            raise InvalidRequest("strings must not contain lone surrogates")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_nul(key)
            _refuse_nul(item)
    elif isinstance(value, list):
        for item in value:
            _refuse_nul(item)


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def query_items(request: Request) -> dict[str, str]:
    """Query parameters in URL order; a repeated parameter is refused."""
    items: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in items:
            raise InvalidRequest(f"query parameter {key!r} is repeated")
        _refuse_nul(key)
        _refuse_nul(value)
        items[key] = value
    return items


def validate(model: type[Model], data: dict[str, Any]) -> Model:
    """Pydantic validation with errors in the service's error shape."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
            for err in exc.errors()
        ]
        first = problems[0] if problems else {"field": "", "problem": "invalid"}
        raise InvalidRequest(
            f"invalid {first['field'] or 'request'}: {first['problem']}", {"problems": problems}
        ) from None


def without_owner(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "ownerAddress"}


def owner_address_of(data: dict[str, Any]) -> str:
    """The ownerAddress exactly as sent (signature mode signs it verbatim)."""
    owner = data.get("ownerAddress")
    if not isinstance(owner, str):
        raise InvalidRequest("ownerAddress is required", {"field": "ownerAddress"})
    try:
        checksum_address(owner)
    except ValueError as exc:
        raise InvalidRequest(f"ownerAddress {exc}", {"field": "ownerAddress"}) from None
    return owner


@functools.cache
def query_types(model: type[BaseModel]) -> dict[str, str]:
    """Each query parameter's JSON type (``integer``, ``boolean``, ``string``) from the
    route's query model: signature mode accepts the query's values signed with these types
    (``{"chainId":31337,"invoiceId":"1"}``), whatever they look like."""
    kinds: dict[str, str] = {}
    for name, field in model.model_json_schema()["properties"].items():
        options = field.get("anyOf", [field])
        types = {option.get("type") for option in options} - {"null"}
        kinds[name] = types.pop() if len(types) == 1 else "string"
    return kinds


class OwnerBody(BaseModel):
    """A body that names only its owner (routes acting on the owner's own things)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address


class OwnerQuery(BaseModel):
    """A query that names only its owner."""

    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
