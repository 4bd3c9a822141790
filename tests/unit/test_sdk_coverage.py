"""Both SDKs against the service's ``openapi.json``: every route has a call in each, every
method of each is a route, every Python model and every TypeScript declaration matches its
schema (raw amounts and nonces as int / bigint), every answer has one, and the blocking
Python client is the one generated from the asyncio one."""

from __future__ import annotations

import inspect
import json
import re
import runpy
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from invoicing_client import AsyncClient, Client, models
from invoicing_client import _calls as calls
from invoicing_client._generated import models as generated_models
from invoicing_client._generated.routes import ROUTES
from tests.support.node import node_json

REPO = Path(__file__).resolve().parents[2]
OPENAPI = json.loads((REPO / "openapi.json").read_text())
SCHEMAS: dict[str, Any] = OPENAPI["components"]["schemas"]
OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
RAW = "^[0-9]{1,78}$"  # a uint256 as a decimal string: an int in the SDKs

# SDK model -> the schema it reads, where the names differ.
SCHEMA_OF = {
    "CreatedInvoice": "Invoice",
    "DeletedInvoice": "DeleteResult",
    "EventPage": "EventList",
    "WebhookLogEvent": "WebhookEvent",
}
# Fields a model adds to its schema's (what the client knows of its own request).
CLIENT_FIELDS = {"CreatedInvoice": {"created", "requestSignature"}}
# Models of what the service sends elsewhere than in an answer.
NOT_ANSWERS = {"WebhookEvent"}  # the paid webhook's body (docs/integration/webhooks.md)
# Answers that wrap another schema (read by the SDK as a list, a page or one item).
WRAPPERS = {"InvoiceStatusResult", "InvoiceList", "ApiKeyList", "WebhookSecretList"}
WRAPPERS |= {"WebhookEndpointList"}


def operations() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, methods in OPENAPI["paths"].items()
        for method, operation in methods.items()
    }


def query_names(op: dict[str, Any]) -> set[str]:
    """The query parameters of an operation that an SDK call sends (the client adds
    ownerAddress to every authenticated one)."""
    names = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
    return names - {"ownerAddress"}


def test_every_route_has_an_sdk_call_with_its_signed_action_and_query() -> None:
    ops = operations()
    routes = {(route.method, route.path): route for route in ROUTES.values()}
    assert set(routes) == set(ops)
    assert {key: route.action for key, route in routes.items()} == {
        key: op.get("x-signature-action") for key, op in ops.items()
    }
    assert {key: set(route.query) for key, route in routes.items()} == {
        key: query_names(op) for key, op in ops.items()
    }


def test_a_query_parameter_the_route_does_not_take_is_refused() -> None:
    with pytest.raises(TypeError, match="events.page takes no query parameter state"):
        calls.call("events.page", query={"type": "ping", "state": "failing"})


def public_methods(client: object) -> dict[str, Any]:
    found = {}
    for resource_name, resource in vars(client).items():
        if resource_name.startswith("_") or isinstance(resource, str):
            continue
        for name, member in inspect.getmembers(resource, inspect.ismethod):
            if not name.startswith("_"):
                found[f"{resource_name}.{name}"] = member
    return found


def test_every_method_of_both_python_clients_is_a_route_and_every_route_a_method() -> None:
    sync = public_methods(Client("http://svc.test", OWNER, api_key="k"))
    asynchronous = public_methods(AsyncClient("http://svc.test", OWNER, api_key="k"))
    assert set(sync) == set(asynchronous) == set(ROUTES)
    for name, method in asynchronous.items():
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name
        assert not inspect.iscoroutinefunction(sync[name]), name
        assert inspect.signature(method) == inspect.signature(sync[name]) or name.endswith(
            ".list"  # Iterator vs AsyncIterator
        ), name


def test_the_blocking_client_is_generated_from_the_asyncio_one() -> None:
    generator = runpy.run_path(str(REPO / "clients/python/generate_sync.py"))
    for path, text in generator["generated"]().items():
        assert path.read_text() == text, f"run python clients/python/generate_sync.py ({path})"


def test_every_route_and_method_of_the_js_sdk() -> None:
    script = """
        const { Client, ROUTES } = await import('./clients/js/src/index.js');
        const ownerAddress = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
        const client = new Client({ baseUrl: 'http://svc.test', ownerAddress, apiKey: 'k' });
        const methods = [];
        for (const [resource, value] of Object.entries(client)) {
          if (value === null || typeof value !== 'object' || resource === 'transport') continue;
          for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(value))) {
            if (name !== 'constructor') methods.push(`${resource}.${name}`);
          }
        }
        console.log(JSON.stringify({ routes: ROUTES, methods }));
    """
    answer = node_json(script)
    routes = {(row[0], row[1]): row for row in answer["routes"].values()}
    assert sorted(answer["methods"]) == sorted(answer["routes"])
    ops = operations()
    assert set(routes) == set(ops)
    assert {key: row[2] for key, row in routes.items()} == {
        key: op.get("x-signature-action") for key, op in ops.items()
    }
    assert {key: set(row[3] if len(row) > 3 else []) for key, row in routes.items()} == {
        key: query_names(op) for key, op in ops.items()
    }


def wire_kinds(prop: dict[str, Any]) -> set[str]:
    kinds = set()
    for variant in prop.get("anyOf", [prop]):
        if "$ref" in variant:
            target = SCHEMAS[variant["$ref"].rsplit("/", 1)[1]]
            kinds.add("string" if target.get("type") == "string" else "object")
        elif variant.get("type") == "string" and variant.get("pattern") == RAW:
            kinds.add("raw")
        else:
            kinds.add(variant["type"])
    return kinds


PYTHON_KINDS = {int: {"integer", "raw"}, str: {"string"}, bool: {"boolean"}, float: {"number"}}
PYTHON_KINDS |= {list: {"array"}, dict: {"object"}, types.NoneType: {"null"}}


def python_kinds(annotation: Any) -> set[str]:
    origin = typing.get_origin(annotation)
    members = typing.get_args(annotation) if origin is types.UnionType else (annotation,)
    kinds = set()
    for member in members:
        base = typing.get_origin(member) or member
        if isinstance(base, type) and issubclass(base, BaseModel):
            kinds.add("object")
        else:
            kinds |= PYTHON_KINDS[base]
    return kinds


def sdk_models() -> list[type[BaseModel]]:
    found = [
        cls
        for cls in vars(models).values()
        if isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.__module__ in (models.__name__, generated_models.__name__)
    ]
    return [cls for cls in found if not cls.__name__.startswith("_")]


def answer_models() -> list[type[BaseModel]]:
    return [cls for cls in sdk_models() if cls.__name__ not in NOT_ANSWERS]


@pytest.mark.parametrize("model", answer_models(), ids=lambda cls: cls.__name__)
def test_every_model_reads_its_schema_field_for_field(model: type[BaseModel]) -> None:
    schema = SCHEMAS[SCHEMA_OF.get(model.__name__, model.__name__)]
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    extra = CLIENT_FIELDS.get(model.__name__, set())
    assert set(fields) - extra == set(schema["properties"])
    for alias, prop in schema["properties"].items():
        wire, mine = wire_kinds(prop), python_kinds(fields[alias].annotation)
        # Each kind the wire sends is read; a raw amount or a nonce (a decimal string) is an
        # int, never a str (docs/integration/sdks.md).
        assert wire <= mine, (alias, wire, mine)
        if fields[alias].is_required():
            assert alias in schema["required"], alias


def response_schemas() -> set[str]:
    """The schema of every answer of every route (an NDJSON route's: of one line)."""
    answers = set()
    for op in operations().values():
        for status, response in op["responses"].items():
            for content in response.get("content", {}).values():
                ref = content.get("x-ndjson-item", content["schema"]).get("$ref")
                if status.startswith("2") and ref:
                    answers.add(ref.rsplit("/", 1)[1])
    return answers


def test_every_answer_of_the_api_has_a_model() -> None:
    read = {SCHEMA_OF.get(cls.__name__, cls.__name__) for cls in answer_models()}
    assert response_schemas() - WRAPPERS - read == set()


# The JS SDK's models are its type declarations: interface -> schema, where the names differ.
TS_SCHEMA_OF = {
    "CreatedInvoice": "Invoice",
    "CreateInvoice": "CreateInvoiceBody",
    "DeletedInvoice": "DeleteResult",
    "EventPage": "EventList",
    "InvoicePage": "InvoiceList",
    "WebhookLogEvent": "WebhookEvent",
}
# Fields a declaration adds to, or leaves out of, its schema's.
TS_CLIENT_FIELDS = {"CreatedInvoice": {"created", "requestSignature"}}
TS_LEFT_OUT = {"CreateInvoice": {"ownerAddress"}}  # the client adds it
# Declarations of no schema: options of the client's own calls, and the paid webhook's body.
TS_NOT_SCHEMAS = {"ClientOptions", "FeeOptions", "RefundOptions", "ListFilters", "PaymentsQuery"}
TS_NOT_SCHEMAS |= {"SignedMessage", "VerifyOptions", "PaidWebhook"}


def ts_interfaces() -> dict[str, dict[str, str]]:
    """Each ``export interface`` of the declarations (the generated ones, then index.d.ts): its
    fields (``name?`` when optional) and types."""
    files = ("clients/js/src/generated/models.d.ts", "clients/js/src/index.d.ts")
    text = "\n".join((REPO / name).read_text() for name in files)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    found = {}
    for match in re.finditer(r"export interface (\w+)(?: extends (\w+))? \{", text):
        depth, start = 1, match.end()
        end = start
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        fields = dict(found.get(match[2] or "", {}))
        for member in re.split(r";|\n(?=\s*\w+\??:)", text[start : end - 1]):
            name, colon, kind = member.strip().partition(":")
            if colon and not name.startswith("["):
                fields[name.strip()] = kind.strip()
        found[match[1]] = fields
    return found


def test_every_js_declaration_reads_its_schema_field_for_field() -> None:
    interfaces = ts_interfaces()
    assert set(interfaces) - TS_NOT_SCHEMAS <= {
        name for name in interfaces if TS_SCHEMA_OF.get(name, name) in SCHEMAS
    }
    for name, fields in interfaces.items():
        if name in TS_NOT_SCHEMAS:
            continue
        schema = SCHEMAS[TS_SCHEMA_OF.get(name, name)]
        names = {field.rstrip("?") for field in fields}
        expected = set(schema["properties"]) - TS_LEFT_OUT.get(name, set())
        assert names - TS_CLIENT_FIELDS.get(name, set()) == expected, name
        for field, kind in fields.items():
            prop = schema["properties"].get(field.rstrip("?"))
            if prop is None:
                continue
            wire = wire_kinds(prop)
            # A raw amount or a nonce is a bigint; other integers are numbers.
            assert ("raw" in wire) == ("bigint" in kind), (name, field, kind)
            assert ("integer" in wire) <= ("number" in kind), (name, field, kind)
            assert ("null" in wire) <= ("null" in kind), (name, field, kind)
            if not field.endswith("?"):
                assert field in schema["required"], (name, field)


def test_every_answer_of_the_api_has_a_js_declaration() -> None:
    declared = {TS_SCHEMA_OF.get(name, name) for name in ts_interfaces()}
    assert response_schemas() - WRAPPERS - declared == set()


def test_the_js_sdk_reads_as_bigints_every_raw_field_the_service_answers() -> None:
    raw = {
        field
        for name, schema in SCHEMAS.items()
        if not name.endswith("Body")
        for field, prop in schema.get("properties", {}).items()
        if "raw" in wire_kinds(prop)
    }
    script = f"const raw = {json.dumps(sorted(raw))};" + (
        "const { parseJson } = await import('./clients/js/src/transport.js');"
        "const sample = Object.fromEntries(raw.map((key) => [key, '12']));"
        "const read = parseJson(JSON.stringify({ ...sample, amount: '12' }));"
        "console.log(JSON.stringify(Object.entries(read).map(([k, v]) => [k, typeof v])));"
    )
    kinds = dict(node_json(script))
    assert kinds == {**dict.fromkeys(raw, "bigint"), "amount": "string"}
