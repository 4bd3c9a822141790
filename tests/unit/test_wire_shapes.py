"""One wire shape per resource: the model that documents a route's success in openapi.json is
the one that writes its body (``Answer[Model]``, web/routedocs.py), and ``Answer`` writes
exactly the JSON the service wrote before it (key order, numbers, nulls, absent keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import pytest
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from invoicing.web.api.responses import Invoice, InvoiceStatusResult, Readiness
from invoicing.web.app import ROUTERS
from invoicing.web.routedocs import Answer

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


def documented_routes() -> list[APIRoute]:
    return [
        route
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema
    ]


def documented_models(route: APIRoute) -> set[type[BaseModel]]:
    """The models of every JSON answer the route documents besides its errors."""
    return {
        response["model"]
        for status, response in route.responses.items()
        if "model" in response and not 400 <= int(status) < 500
    }


def answered_model(route: APIRoute) -> Any:
    returned = get_type_hints(route.endpoint)["return"]
    if get_origin(returned) is not Answer:
        return None
    (model,) = get_args(returned)
    return model


def name(route: APIRoute) -> str:
    return f"{sorted(route.methods)[0]} {route.path}"


def test_every_documented_operation_is_checked() -> None:
    committed = json.loads(OPENAPI.read_text())["paths"]
    operations = {f"{m.upper()} {path}" for path, item in committed.items() for m in item}
    assert {name(route) for route in documented_routes()} == operations


def test_each_route_answers_with_the_model_that_documents_it() -> None:
    mismatched = {}
    for route in documented_routes():
        documented = documented_models(route)
        answered = answered_model(route)
        expected = next(iter(documented)) if len(documented) == 1 else documented
        if answered != expected and not (answered is None and not documented):
            mismatched[name(route)] = (answered, documented)
    assert mismatched == {}


def invoice_fields(**given: Any) -> dict[str, Any]:
    """An Invoice object in the order the service has always written it; ``given`` are the
    fields present only when set (``description``, ``metadata``)."""
    return {
        "id": "inv_1",
        "ownerAddress": "0x" + "Ab" * 20,
        "chainId": 8453,
        "invoiceId": "7",
        "paymentAddress": "0x" + "cD" * 20,
        "salt": "0x" + "00" * 32,
        "amount": "1.5",
        "tokenAddress": None,
        **given,
        "expiresAt": 1_900_000_000_000,
        "status": "pending",
        "paid": False,
        "paidAt": None,
        "withdrawn": False,
        "withdrawnAt": None,
        "requiredRaw": "1500000000000000000",
        "balanceRaw": "0",
        "metaBalance": "0",
        "lastCheckedAt": 0,
        "createdAt": 1_800_000_000_000,
        "updatedAt": 1_800_000_000_000,
        "url": "http://127.0.0.1:8000/pay/0x" + "cD" * 20,
        "capture": "automatic",
    }


def test_answer_leaves_out_what_was_never_set_and_keeps_nulls() -> None:
    body = Answer(InvoiceStatusResult(invoice=Invoice.model_validate(invoice_fields()))).body

    assert body.startswith(b'{"invoice":{"id":"inv_1","ownerAddress":')
    assert b'"tokenAddress":null,"expiresAt":' in body
    assert b'"paidAt":null' in body and b'"lastCheckedAt":0' in body
    assert b"description" not in body and b"metadata" not in body and b"refunds" not in body


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"description": "Café ✓", "metadata": {"n": 1e-07, "m": 5e-05, "big": 10**30, "f": 1.0}},
        {"metadata": {"nested": [{"b": None, "a": True}], "s": "\u2028 </script> \x00"}},
    ],
)
def test_answer_writes_the_bytes_json_response_wrote(given: dict[str, Any]) -> None:
    fields = invoice_fields(**given)

    written = Answer(Invoice.model_validate(fields)).body

    assert written == JSONResponse(fields).body


def test_answer_keeps_the_status_code_and_headers() -> None:
    answer = Answer(Readiness(ready=False, checks={"database": "error: OSError"}), 503)

    assert answer.status_code == 503
    assert answer.body == b'{"ready":false,"checks":{"database":"error: OSError"}}'
