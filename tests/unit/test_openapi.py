"""The committed openapi.json is the app's schema; regenerate with `make openapi`."""

from __future__ import annotations

import json
from pathlib import Path

from invoicing.web.openapi import build_schema

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    assert json.loads(COMMITTED.read_text()) == build_schema(), (
        "openapi.json is stale: run `make openapi`"
    )


def test_no_422_and_every_operation_has_security_and_a_named_success_schema() -> None:
    document = json.loads(COMMITTED.read_text())
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert "422" not in operation["responses"], where
            assert "security" in operation, where
            successes = [s for s in operation["responses"] if s.startswith("2")]
            assert successes, where
            for status in successes:
                content = operation["responses"][status]["content"]
                if "application/json" in content:
                    assert content["application/json"]["schema"]["$ref"].startswith(
                        "#/components/schemas/"
                    ), where
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_the_documented_types_of_the_interface() -> None:
    document = json.loads(COMMITTED.read_text())
    schemas = document["components"]["schemas"]
    fee = schemas["SetFeeBody"]["properties"]
    uint = {"type": "string", "pattern": "^[0-9]{1,78}$"}

    assert (fee["feeBps"]["minimum"], fee["feeBps"]["maximum"]) == (0, 500)
    for name in ("nonce", "deadline"):
        assert {k: fee[name][k] for k in uint} == uint, name
    refund = schemas["RefundBody"]["properties"]
    assert {k: refund["amountRaw"][k] for k in uint} == uint
    assert schemas["Invoice"]["properties"]["requiredRaw"]["pattern"] == uint["pattern"]
    assert document["components"]["securitySchemes"] == {
        "apiKey": {**document["components"]["securitySchemes"]["apiKey"], "in": "header",
                   "name": "x-service-api-key", "type": "apiKey"},
        "signature": {**document["components"]["securitySchemes"]["signature"], "in": "header",
                      "name": "x-service-signature", "type": "apiKey"},
        "timestamp": {**document["components"]["securitySchemes"]["timestamp"], "in": "header",
                      "name": "x-service-timestamp", "type": "apiKey"},
    }  # fmt: skip
    keys = document["paths"]["/integration/api-keys"]["post"]
    assert keys["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CreateKeyBody"
    }
    assert keys["security"] == [{"signature": [], "timestamp": []}]
    create = document["paths"]["/integration/invoices"]["post"]
    assert create["security"] == [{"apiKey": []}, {"signature": [], "timestamp": []}]
    assert set(create["responses"]) == {"200", "201", "400", "401", "403", "409", "413", "429"}
    codes_409 = create["responses"]["409"]["content"]["application/json"]["schema"]["allOf"][1]
    assert codes_409["properties"]["error"]["properties"]["code"]["enum"] == [
        "invoice_exists",
        "price_unavailable",
    ]
