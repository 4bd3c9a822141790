"""How a route documents itself in ``openapi.json``: named response models, the errors it
can answer, and who may call it (for the API's and the payment page's routes alike).

API routes read their input raw (signature mode signs it as sent), so FastAPI sees no
parameters; each route passes ``**documented(...)`` to its decorator instead::

    @router.get(
        "/status",
        **documented(
            "Look up one invoice",
            ok=InvoiceStatusResult,           # a named pydantic model of the 2xx body
            query=StatusQuery,                # the model the handler validates with
            action="invoice.status",          # what a request signature signs
            sdk="invoices.status",            # the SDK method that calls it
            errors=OWNER_ROUTE_ERRORS + (NotFound, ChainUnavailable),
        ),
    )

``action`` names the signature mode's action (``x-signature-action`` in the document);
``sdk`` the SDK method that calls the route, as ``resource.method`` in Python's spelling
(``x-sdk-methods``; a pagination helper over the same route follows it:
``sdk=("invoices.page", "invoices.list")``). ``make sdk`` generates both SDKs' route tables
and models from the document (clients/sdkgen), and refuses a route without ``sdk``.
``errors`` lists exception classes of ``invoicing.errors``: each status they map to is
documented with the ``ErrorResponse`` schema, its ``code`` restricted to their codes (429
with ``Retry-After``). ``auth`` is ``OWNER_AUTH`` (API key or request signature, the
default), ``SIGNATURE_AUTH`` (signature only) or ``PUBLIC``. New routes add their response
models in ``web/api/responses.py`` (the payment page's beside it) and use the same call; the
committed ``openapi.json`` is regenerated with ``make openapi`` and checked by
tests/unit/test_openapi.py, and tests/acceptance/test_schemathesis.py drives every documented
route.

The model that documents a route's success is also what writes it: a handler returns
``Answer(Model(...))`` and is annotated ``-> Answer[Model]`` (mypy holds the two together;
tests/unit/test_wire_shapes.py holds the annotation to ``ok=``), so each resource has one wire
shape. The invoice routes (the hot paths) return ``Answer(Written(content))`` instead:
content built in the model's wire form from the row, not built into the model and dumped
again; the same test holds that content to the bytes the model writes. Their ``Written``
takes its model from the handler's annotation (mypy infers it): spelled out,
``Written[Model](...)`` goes through typing's generic alias at every call (about 1 µs).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.errors import (
    Forbidden,
    InvalidRequest,
    PayloadTooLarge,
    RateLimited,
    ReplayedRequest,
    ServiceError,
    TimestampOutOfWindow,
    Unauthorized,
)

REF = "#/components/schemas/"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Written(Generic[M]):
    """An answer's content already in the wire form of its model ``M``: the model's fields
    in its order, those never set left out, every value as JSON has it. The invoice routes
    (create, status, list: the hot paths) build their answers this way from the row, instead
    of building the model and dumping it again; tests/unit/test_wire_shapes.py holds the
    content to what the model writes."""

    content: dict[str, Any]


class Answer(JSONResponse, Generic[M]):
    """A JSON answer written by the response model that documents the route: the model's
    fields in its order, those never set (the "present only when" ones) left out.

    The model gives the content (or ``Written`` content in its form) and ``JSONResponse``
    writes it, as it writes every other answer (errors included). Pydantic's own JSON writer
    would be quicker but spells some floats otherwise (``1e-7``, ``0.00005``, where the
    service has always written ``1e-07``, ``5e-05``), and an invoice's ``metadata`` is the
    owner's JSON, floats and all."""

    def __init__(
        self, body: M | Written[M], status_code: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        if isinstance(body, Written):
            content = body.content
        else:
            # by_alias: a field named for a Python keyword is written as its alias ("from").
            content = body.model_dump(mode="json", exclude_unset=True, by_alias=True)
        super().__init__(content, status_code=status_code, headers=headers)

    def render(self, content: Any) -> bytes:
        """``JSONResponse.render``'s bytes, from one encoder per process (``json.dumps``
        with options builds an encoder at every call)."""
        return _ENCODER.encode(content).encode("utf-8")


# JSONResponse's options: UTF-8 as is, no NaN or Infinity, no spaces.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# Types of response fields, as the service writes them.
ADDRESS_PATTERN = "^0x[0-9a-fA-F]{40}$"
UINT_PATTERN = "^[0-9]{1,78}$"

AddressOut = Annotated[
    str, WithJsonSchema({"type": "string", "pattern": ADDRESS_PATTERN, "description": "EIP-55"})
]
RawAmount = Annotated[
    str,
    WithJsonSchema(
        {"type": "string", "pattern": UINT_PATTERN, "description": "Raw token units, decimal."}
    ),
]
DecimalAmount = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[0-9]+(\.[0-9]+)?$",
            "description": "Human-readable decimal amount.",
        }
    ),
]
Uint256String = Annotated[
    str,
    WithJsonSchema({"type": "string", "pattern": UINT_PATTERN, "description": "uint256, decimal."}),
]
TimestampMs = Annotated[int, Field(ge=0, description="Unix time in milliseconds.")]
Hex32 = Annotated[str, WithJsonSchema({"type": "string", "pattern": "^0x[0-9a-fA-F]{64}$"})]
TxHash = Hex32

OWNER_AUTH: list[dict[str, list[str]]] = [{"apiKey": []}, {"signature": [], "timestamp": []}]
SIGNATURE_AUTH: list[dict[str, list[str]]] = [{"signature": [], "timestamp": []}]
PUBLIC: list[dict[str, list[str]]] = []

# What every authenticated /integration route can answer before its own work.
OWNER_ROUTE_ERRORS: tuple[type[ServiceError], ...] = (
    InvalidRequest,
    Unauthorized,
    TimestampOutOfWindow,
    ReplayedRequest,
    Forbidden,
    RateLimited,
)
# ... and those reading a JSON body.
BODY_ROUTE_ERRORS = (*OWNER_ROUTE_ERRORS, PayloadTooLarge)

SECURITY_SCHEMES: dict[str, Any] = {
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": API_KEY_HEADER,
        "description": "API key mode: an API key of the request's ownerAddress.",
    },
    "signature": {
        "type": "apiKey",
        "in": "header",
        "name": SIGNATURE_HEADER,
        "description": "Request signature mode: the owner wallet's EIP-191 "
        'personal_sign of "Service API Request Signature\\n" + JSON.stringify({action, '
        "ownerAddress, timestamp, payload}); sent with x-service-timestamp.",
    },
    "timestamp": {
        "type": "apiKey",
        "in": "header",
        "name": TIMESTAMP_HEADER,
        "description": "Unix time in milliseconds (decimal), within 5 minutes of the "
        "server's; each (ownerAddress, timestamp) is accepted once.",
    },
}


# The document's own description: what a client generated from it cannot read elsewhere.
API_DESCRIPTION = """\
Crypto invoices on EVM chains: escrow per invoice, paid webhooks, batched withdrawals and
gasless owner settings.

**Authentication** (every /integration route; `ownerAddress` is always required): the
owner's API key in `x-service-api-key`, or a request signature: `x-service-timestamp`
(unix ms, within 5 minutes, once per owner) and `x-service-signature`, the owner wallet's
EIP-191 personal_sign of `Service API Request Signature` + newline +
`JSON.stringify({action, ownerAddress, timestamp, payload})`. `payload` is the body (POST)
or the query (GET, DELETE) without `ownerAddress`, keys in the order sent (or sorted).
Query values are signed typed by the parameter's schema (integers as numbers, `paid` as
true/false, strings as strings even when all digits: `{"chainId":31337,"invoiceId":"1"}`)
or all as strings. Body numbers are signed as `JSON.stringify` writes them (`1e-7`,
`1e+21`); Python's `json.dumps` form (`1e-07`) is accepted too.

**Fee deadlines**: a `deadline` over 10^12 is taken as milliseconds; the EIP-712 signature
covers it in seconds (deadline // 1000, the value relayed on-chain).

**CORS**: `/fees/*` and `/pay/{paymentAddress}/status` allow other origins (configurable);
`/integration/*` only origins the operator allows; never with credentials.
"""


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid", title="Error")

    code: str = Field(description="Stable snake_case error code.")
    message: str = Field(description="Human-readable explanation.")
    details: dict[str, Any] | None = Field(
        default=None, description="Optional structured details (omitted when empty)."
    )


class ErrorResponse(BaseModel):
    """Every error answer: ``{"error": {"code", "message", "details"?}}``."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorBody


# Models the document names in components.schemas besides the response models FastAPI
# finds itself: request bodies (registered by ``documented``), ErrorResponse, and any a
# route references by hand (``schema_ref``).
_NAMED_MODELS: dict[str, type[BaseModel]] = {}


def schema_ref(model: type[BaseModel]) -> dict[str, str]:
    """A ``$ref`` to ``model``, which the document then carries in components.schemas."""
    known = _NAMED_MODELS.setdefault(model.__name__, model)
    if known is not model:  # two models, one name: the document would show only one
        raise ValueError(f"two schemas are named {model.__name__}: rename one")
    return {"$ref": REF + model.__name__}


def query_schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI ``parameters`` for routes that read their query raw (to verify signatures):
    the route's query model is the one description of its parameters (an optional one is
    left out, never sent as null)."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    return {
        "parameters": [
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "schema": _without_null(field),
            }
            for name, field in schema["properties"].items()
        ]
    }


def _without_null(field: dict[str, Any]) -> dict[str, Any]:
    options = [option for option in field.get("anyOf", ()) if option.get("type") != "null"]
    if len(options) != 1:
        return field
    rest = {key: value for key, value in field.items() if key not in ("anyOf", "default")}
    return {**options[0], **rest}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI ``requestBody`` for routes that read their body raw (to verify signatures)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema_ref(model)}},
        }
    }


def _codes_by_status(errors: Iterable[type[ServiceError]]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for error in errors:
        codes = found.setdefault(error.status, [])
        if error.code not in codes:
            codes.append(error.code)
    return dict(sorted(found.items()))


def error_responses(errors: Iterable[type[ServiceError]]) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses`` entries for the statuses of ``errors``, each with its codes."""
    responses: dict[int | str, dict[str, Any]] = {}
    for status, codes in _codes_by_status(errors).items():
        schema = {
            "allOf": [
                {"$ref": REF + "ErrorResponse"},
                {"properties": {"error": {"properties": {"code": {"enum": codes}}}}},
            ]
        }
        response: dict[str, Any] = {
            "description": "Error: " + ", ".join(codes),
            "content": {"application/json": {"schema": schema}},
        }
        if status == RateLimited.status:
            response["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before trying again.",
                    "schema": {"type": "integer", "minimum": 0},
                }
            }
        responses[status] = response
    return responses


def documented(
    summary: str,
    *,
    ok: type[BaseModel] | None = None,
    status: int = 200,
    ok_description: str = "Success",
    errors: Sequence[type[ServiceError]] = (),
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    auth: list[dict[str, list[str]]] = OWNER_AUTH,
    ok_response: dict[str, Any] | None = None,
    other_responses: dict[int | str, dict[str, Any]] | None = None,
    action: str | None = None,
    sdk: str | tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for a route decorator (``@router.get(path, **documented(...))``):
    ``ok`` is the named model of the ``status`` body (or ``ok_response`` a raw OpenAPI
    response for other media types); ``errors`` the exception classes it can answer;
    ``other_responses`` any other FastAPI ``responses`` entries; ``action`` the signature
    mode's action (``x-signature-action``: clients and the schemathesis run sign with it);
    ``sdk`` the SDK methods that call it (``x-sdk-methods``, what ``make sdk`` names them)."""
    success = ok_response or {"model": ok, "description": ok_description}
    extra: dict[str, Any] = {"security": auth}
    if action is not None:
        extra["x-signature-action"] = action
    if sdk is not None:
        extra["x-sdk-methods"] = [sdk] if isinstance(sdk, str) else list(sdk)
    if body is not None:
        extra.update(body_schema(body))
    if query is not None:
        extra.update(query_schema(query))
    return {
        "summary": summary,
        "status_code": status,
        # The handler writes its answer itself (``Answer``): FastAPI neither validates nor
        # documents it a second time from the return annotation.
        "response_model": None,
        "responses": {status: success, **error_responses(errors), **(other_responses or {})},
        "openapi_extra": extra,
    }


def install_openapi(app: FastAPI) -> None:
    """The app's OpenAPI document: FastAPI's, plus the error schema and the security
    schemes, without the 422 FastAPI adds for path parameters (the service answers every
    malformed request with 400 ``invalid_request``)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            openapi_version=app.openapi_version,
            description=app.description,
            routes=app.routes,
        )
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        named: list[type[BaseModel]] = [ErrorResponse, *_NAMED_MODELS.values()]
        for model in named:
            found = model.model_json_schema(ref_template=REF + "{model}")
            schemas.update(found.pop("$defs", {}))
            schemas[model.__name__] = found
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        components["securitySchemes"] = SECURITY_SCHEMES
        for operations in schema["paths"].values():
            for operation in operations.values():
                operation["responses"].pop("422", None)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
