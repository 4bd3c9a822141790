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

from invoicing.invoices.owner_view import refund_view, wallet_refund_view
from invoicing.invoices.views import invoice_to_dict
from invoicing.tables.invoices import InvoiceRow
from invoicing.tables.refunds import Refund, WalletRefund
from invoicing.web.api.responses import Invoice, InvoiceList, InvoiceStatusResult, Readiness
from invoicing.web.app import ROUTERS
from invoicing.web.routedocs import Answer, Written

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


def invoice_row(**changes: Any) -> InvoiceRow:
    """A stored invoice row; ``changes`` sets its optional parts."""
    fields: dict[str, Any] = {
        "id": "0192f0c2-1c2b-7b9a-8f0e-1234567890ab",
        "owner_address": "0x" + "Ab" * 20,
        "owner_key": "0x" + "ab" * 20,
        "chain_id": 8453,
        "invoice_id": "7",
        "payment_address": "0x" + "cD" * 20,
        "salt": "0x" + "01" * 32,
        "amount": "1.5",
        "token_address": None,
        "decimals": 18,
        "required_raw": "1500000000000000000",
        "description": None,
        "metadata_": None,
        "webhook_url": None,
        "expires_at": 1_900_000_000_000,
        "status": "pending",
        "paid": False,
        "paid_at": None,
        "withdrawn": False,
        "withdrawn_at": None,
        "balance_raw": "0",
        "last_checked_at": 1_800_000_000_500,
        "created_at": 1_800_000_000_000,
        "updated_at": 1_800_000_000_001,
        "deleted_at": None,
        "auth_mode": "api_key",
        "api_key_id": None,
        "auth_signature": None,
        "auth_timestamp": None,
        "request_hash": "h",
        "watch": True,
        "swept_raw": "0",
        "lifetime_check_at": 0,
        "has_extras": False,
    }
    return InvoiceRow(**{**fields, **changes})


TOKEN = "0x" + "Ee" * 20
REFUND = Refund(
    tx_hash="0x" + "aa" * 32,
    to_address="0x" + "Bb" * 20,
    token_address=None,
    amount_raw="5",
    status="submitted",
    created_at=1_800_000_000_100,
)
WALLET_REFUND = WalletRefund(
    tx_hash="0x" + "bb" * 32,
    to_address="0x" + "Bb" * 20,
    token_address=TOKEN,
    amount_raw="7",
    created_at=1_800_000_000_200,
)

# Every optional part of the Invoice object, alone and together.
ROW_VARIANTS = {
    "plain": {},
    "given": {
        "description": "Café ✓",
        "metadata_": {"n": 1e-07, "nested": [{"b": None, "a": True}], "big": 10**30},
        "redirect_url": "https://shop.example/thanks",
        "cancel_url": "https://shop.example/cart",
    },
    "token paid": {
        "token_address": TOKEN,
        "decimals": 6,
        "required_raw": "1500000",
        "status": "paid",
        "paid": True,
        "paid_at": 1_800_000_000_300,
        "balance_raw": "1500001",
        "withdrawn": True,
        "withdrawn_at": 1_800_000_000_400,
    },
    "manual capture": {"capture": "manual", "captured_at": 1_800_000_000_600},
    "pegged price": {
        "currency": "USD",
        "fiat_amount": "1.50",
        "rate": "1",
        "rate_source": "peg",
    },
    "feed price and tolerance": {
        "currency": "EUR",
        "fiat_amount": "10",
        "rate": "2950.12",
        "rate_source": "chainlink",
        "feed_address": "0x" + "Fa" * 20,
        "feed_round_id": "18446744073709551617",
        "feed_updated_at": 1_799_999_999_000,
        "tolerance_bps": 50,
        "shortfall_raw": "1000",
    },
    "tolerance only": {"tolerance_bps": 500},
}


@pytest.mark.parametrize("changes", ROW_VARIANTS.values(), ids=list(ROW_VARIANTS))
@pytest.mark.parametrize("extras", [False, True], ids=["no extras", "refunds and balances"])
def test_an_invoice_view_is_written_as_its_model_writes_it(
    changes: dict[str, Any], extras: bool
) -> None:
    # The invoice routes write the view as built (``Written``), skipping the model: it must be
    # exactly what the model would have written, key order included, nested objects too.
    view = invoice_to_dict(
        invoice_row(**changes),
        "http://127.0.0.1:8000/",
        payments=[
            {
                "txHash": "0x" + "cc" * 32,
                "from": "0x" + "Dd" * 20,
                "amountRaw": "9",
                "tokenAddress": None,
                "blockNumber": 12,
            }
        ]
        if extras
        else None,
        refunds=[refund_view(REFUND), wallet_refund_view(WALLET_REFUND)] if extras else None,
        other_balances=[{"tokenAddress": TOKEN, "balanceRaw": "3"}] if extras else None,
        last_checked_at=1_800_000_000_900 if extras else None,
        x402=frozenset({(8453, TOKEN.lower())}),
    )
    model = Invoice.model_validate(view)

    assert Answer(Written[Invoice](view)).body == Answer(model).body
    assert Answer(Written[InvoiceStatusResult]({"invoice": view})).body == (
        Answer(InvoiceStatusResult(invoice=model)).body
    )
    listed = {"items": [view, view], "total": 2, "page": 1, "limit": 20}
    assert Answer(Written[InvoiceList](listed)).body == Answer(InvoiceList(**listed)).body
