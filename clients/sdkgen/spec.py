"""What both SDKs are generated from: the operations of ``openapi.json`` with the SDK methods
that call them (``x-sdk-methods``), and the schemas of their answers.

The few choices the document cannot carry are the tables below, shared by both languages."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RAW_PATTERN = "^[0-9]{1,78}$"  # a uint256 as a decimal string: int in Python, bigint in JS
METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"

# Schema -> the SDKs' model, where the SDKs have always named it otherwise.
NAMES = {
    "DeleteResult": "DeletedInvoice",
    "EventList": "EventPage",
    "InvoiceList": "InvoicePage",
    "WebhookEvent": "WebhookLogEvent",  # the SDKs' WebhookEvent is the paid webhook's body
}
# Fields a server of an earlier version leaves out: optional in both SDKs, with this default
# in Python, so a newer SDK still reads an older server's answer.
ABSENT_FROM_OLDER_SERVERS: dict[tuple[str, str], Any] = {
    ("Invoice", "salt"): None,
    ("Invoice", "lastCheckedAt"): None,
    ("FeeSettings", "factory"): None,
    ("EscrowExportLine", "factory"): None,
    ("OwnerSettings", "underpaymentToleranceBps"): 0,
    ("OwnerSettings", "reportingCurrency"): None,
    # Manual capture: an older server captured every invoice when paid, and had no window.
    ("Invoice", "capture"): "automatic",
    ("OwnerSettings", "captureWindowS"): None,
    ("OwnerSettings", "captureAtWindowEnd"): None,
}


class SpecError(ValueError):
    """openapi.json lacks what the SDKs need (said in the message, with the fix)."""


@dataclass(frozen=True)
class Operation:
    method: str  # upper case
    path: str  # with {placeholders} for path parameters
    action: str | None  # x-signature-action; None for the public routes
    query: tuple[str, ...]  # the query parameters it takes, besides ownerAddress
    sdk_methods: tuple[str, ...]  # "resource.method" in Python's spelling, the call first


def operations(spec: dict[str, Any]) -> list[Operation]:
    """Every operation, in the document's order; a route without ``x-sdk-methods`` is an
    error (the route declares ``documented(..., sdk="resource.method")``)."""
    found, unnamed = [], []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            if method not in METHODS:
                continue
            names = tuple(op.get("x-sdk-methods", ()))
            if not names:
                unnamed.append(f"{method.upper()} {path}")
            query = tuple(
                p["name"]
                for p in op.get("parameters", ())
                if p["in"] == "query" and p["name"] != "ownerAddress"
            )
            found.append(
                Operation(method.upper(), path, op.get("x-signature-action"), query, names)
            )
    if unnamed:
        raise SpecError(
            "no SDK method names these routes: give their decorator documented(..., "
            'sdk="resource.method") and run make openapi: ' + ", ".join(unnamed)
        )
    return found


def routes(spec: dict[str, Any]) -> dict[str, Operation]:
    """The operation of each SDK method (Python's spelling), sorted by name."""
    found: dict[str, Operation] = {}
    for op in operations(spec):
        for name in op.sdk_methods:
            if not re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*", name):
                where = f"{op.method} {op.path}"
                raise SpecError(f"{where}: SDK method {name!r} is not resource.method")
            if name in found:
                raise SpecError(f"two routes are named {name}: rename one")
            found[name] = op
    return dict(sorted(found.items()))


def ref_name(ref: str) -> str:
    return ref.removeprefix(REF)


def refs_of(schema: Any) -> list[str]:
    """The schemas ``schema`` refers to, in the order met."""
    if isinstance(schema, dict):
        found = [ref_name(schema["$ref"])] if "$ref" in schema else []
        for value in schema.values():
            found += refs_of(value)
        return found
    if isinstance(schema, list):
        return [name for item in schema for name in refs_of(item)]
    return []


def answer_schemas(spec: dict[str, Any]) -> list[str]:
    """Every schema a success answer carries (an NDJSON answer: its line's), with those they
    refer to, each after the ones it refers to."""
    schemas = spec["components"]["schemas"]
    roots = []
    for methods in spec["paths"].values():
        for method, op in methods.items():
            for status, response in op.get("responses", {}).items() if method in METHODS else ():
                for content in response.get("content", {}).values():
                    ref = content.get("x-ndjson-item", content["schema"]).get("$ref")
                    if status.startswith("2") and ref:
                        roots.append(ref_name(ref))
    return dependency_order(schemas, sorted(set(roots)))


def dependency_order(schemas: dict[str, Any], roots: list[str]) -> list[str]:
    ordered: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:  # placed, or being placed (a schema that refers back to itself)
            return
        seen.add(name)
        for ref in refs_of(schemas[name]):
            visit(ref)
        ordered.append(name)

    for name in roots:
        visit(name)
    return ordered


def variants(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a property (``anyOf``), or the property itself."""
    return list(prop["anyOf"]) if "anyOf" in prop else [prop]


def is_raw(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "string" and prop.get("pattern") == RAW_PATTERN


def fields(name: str, schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """Each property as (wire name, schema, required in the SDKs): the required ones in their
    declared order, then the others by name."""
    properties = schema.get("properties", {})
    required = [key for key in schema.get("required", ()) if key in properties]
    rest = sorted(set(properties) - set(required))
    return [
        (key, properties[key], key in required and (name, key) not in ABSENT_FROM_OLDER_SERVERS)
        for key in required + rest
    ]


def raw_fields(spec: dict[str, Any]) -> list[str]:
    """The names of the answers' raw amounts and nonces (decimal strings on the wire)."""
    schemas = spec["components"]["schemas"]
    return sorted(
        {
            key
            for name in answer_schemas(spec)
            for key, prop in schemas[name].get("properties", {}).items()
            if any(is_raw(variant) for variant in variants(prop))
        }
    )


def sdk_name(schema_name: str) -> str:
    return NAMES.get(schema_name, schema_name)


def description(schema: dict[str, Any]) -> str:
    return " ".join(str(schema.get("description", "")).split())
