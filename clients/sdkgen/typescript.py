"""The JavaScript SDK's generated files: ``generated/models.d.ts`` (a declaration of each
answer, and of the request bodies the SDK's own declarations use) and ``generated/routes.js``
(the route of each SDK method, and the raw fields that are read as bigints)."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from . import spec as api

HEADER = "// Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.\n"
# Schemas whose declaration the SDK writes by hand in index.d.ts (an event's data, typed).
HAND_WRITTEN = {"EventEnvelope"}
# Request bodies the SDK declares (the client adds ownerAddress itself).
BODIES = {"CreateInvoiceBody": "CreateInvoice", "AuthorizationBody": "AuthorizationBody"}
LEFT_OUT = {"ownerAddress"}
SCALARS = {"integer": "number", "number": "number", "string": "string", "boolean": "boolean"}
SCALARS["null"] = "null"


def name_of(schema_name: str) -> str:
    return BODIES.get(schema_name) or api.sdk_name(schema_name)


def type_of(prop: dict[str, Any]) -> str:
    """The TypeScript type of a property: raw amounts and nonces as ``bigint``, enums and
    consts as their literals."""
    members: list[str] = []
    for variant in api.variants(prop):
        kind = single(variant)
        if kind not in members:
            members.append(kind)
    return " | ".join(sorted(members, key=lambda kind: kind == "null"))


def single(variant: dict[str, Any]) -> str:
    if "$ref" in variant:
        return name_of(api.ref_name(variant["$ref"]))
    if "anyOf" in variant:
        return type_of(variant)
    if "const" in variant:
        return json.dumps(variant["const"])
    if "enum" in variant:
        return " | ".join(json.dumps(value) for value in variant["enum"])
    if api.is_raw(variant):
        return "bigint"
    kind = variant.get("type")
    if kind == "array":
        item = single(variant.get("items", {}))
        return f"({item})[]" if "|" in item else f"{item}[]"
    if kind == "object" or kind is None:
        values = variant.get("additionalProperties", True)
        value = "unknown" if values is True or values == {} else type_of(values)
        return f"Record<string, {value}>"
    if kind in SCALARS:
        return SCALARS[kind]
    raise api.SpecError(f"no TypeScript type for {variant}")


def comment(text: str, indent: str = "") -> list[str]:
    if not text:
        return []
    text = text.replace("``", "`").replace("*/", "*\\/")
    lines = textwrap.wrap(text, 94 - len(indent))
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}" for line in lines), f"{indent} */"]


# Descriptions that only restate the type (said once for all in docs/integration/sdks.md).
PLAIN = {"EIP-55", "Raw token units, decimal.", "uint256, decimal.", "Unix time in milliseconds."}
PLAIN |= {"Human-readable decimal amount."}


def declaration(name: str, schema: dict[str, Any]) -> str:
    lines = comment(api.description(schema))
    if schema.get("type") == "string" and "enum" in schema:
        return "\n".join([*lines, f"export type {name_of(name)} = {single(schema)};"])
    lines.append(f"export interface {name_of(name)} {{")
    for key, prop, required in api.fields(name, schema):
        if name in BODIES and key in LEFT_OUT:
            continue
        text = api.description(prop)
        lines += comment("" if text in PLAIN else text, "  ")
        lines.append(f"  {key}{'' if required else '?'}: {type_of(prop)};")
    return "\n".join([*lines, "}"])


def models_module(spec: dict[str, Any]) -> str:
    schemas = spec["components"]["schemas"]
    names = api.dependency_order(schemas, [*api.answer_schemas(spec), *BODIES])
    names = sorted((name for name in names if name not in HAND_WRITTEN), key=name_of)
    imports = ", ".join(sorted(HAND_WRITTEN))
    return (
        HEADER
        + "// The service's answers (and the request bodies the SDK's calls take), one a schema"
        " of\n// openapi.json; index.d.ts exports them beside the client's own declarations.\n"
        + f'import type {{ {imports} }} from "../index.js";\n\n'
        + "\n\n".join(declaration(name, schemas[name]) for name in names)
        + "\n"
    )


def routes_module(spec: dict[str, Any]) -> str:
    rows = []
    for name, op in api.routes(spec).items():
        row = json.dumps([op.method, op.path, op.action, list(op.query)])
        rows.append(f"  {json.dumps(camel(name))}: {row},")
    raw = json.dumps(api.raw_fields(spec))
    return (
        HEADER
        + "// Every route of the service, named by the SDK method that calls it: [method, path,"
        " action,\n// query] (action: the x-signature-action, null for the public routes; query:"
        " the query\n// parameters it takes besides ownerAddress). Each call is built from its"
        " row.\nexport const ROUTES = Object.freeze({\n"
        + "\n".join(rows)
        + "\n});\n\n// The answers' raw amounts and nonces: decimal strings on the wire, bigints"
        " in this SDK.\n" + f"export const RAW_FIELDS = new Set({raw});\n"
    )


def camel(name: str) -> str:
    """``api_keys.set_fee`` -> ``apiKeys.setFee``: the JavaScript SDK's spelling."""
    return re.sub(r"_([a-z0-9])", lambda match: match[1].upper(), name)
