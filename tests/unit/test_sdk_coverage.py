"""Both SDKs against the service's ``openapi.json``: every route has a call in each, every
method of each is a route, every Python model matches its schema, and the blocking Python
client is the one generated from the asyncio one."""

from __future__ import annotations

import inspect
import json
import runpy
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from invoicing_client import AsyncClient, Client, models
from invoicing_client._routes import ROUTES
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
    "Event": "EventEnvelope",
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


def test_every_route_has_an_sdk_call_with_its_signed_action() -> None:
    ops = operations()
    routes = {(route.method, route.path): route.action for route in ROUTES.values()}
    assert set(routes) == set(ops)
    assert routes == {key: op.get("x-signature-action") for key, op in ops.items()}


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
    routes = {name: tuple(route) for name, route in answer["routes"].items()}
    assert sorted(answer["methods"]) == sorted(routes)
    ops = operations()
    assert {(method, path) for method, path, _action in routes.values()} == set(ops)
    assert {(m, p): action for m, p, action in routes.values()} == {
        key: op.get("x-signature-action") for key, op in ops.items()
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
        and cls.__module__ == models.__name__
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


def test_every_answer_of_the_api_has_a_model() -> None:
    read = {SCHEMA_OF.get(cls.__name__, cls.__name__) for cls in answer_models()}
    answers = set()
    for op in operations().values():
        for status, response in op["responses"].items():
            for content in response.get("content", {}).values():
                ref = content.get("x-ndjson-item", content["schema"]).get("$ref")
                if status.startswith("2") and ref:
                    answers.add(ref.rsplit("/", 1)[1])
    assert answers - WRAPPERS - read == set()
