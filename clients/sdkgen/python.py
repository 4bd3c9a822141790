"""The Python SDK's generated modules: ``_generated/models.py`` (pydantic models of the
answers) and ``_generated/routes.py`` (the route of each SDK method)."""

from __future__ import annotations

import keyword
import re
import subprocess
import sys
import textwrap
from typing import Any

from . import spec as api

HEADER = "# Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.\n"
# Schemas the SDK writes by hand (``_calls.InvoicePage``, a page with ``is_last``).
HAND_WRITTEN = {"InvoiceList"}
BASE_MODEL = """
class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )
"""
SCALARS = {"integer": "int", "string": "str", "boolean": "bool", "number": "float", "null": "None"}


def annotation(prop: dict[str, Any], schemas: dict[str, Any]) -> str:
    """The Python type of a property: raw amounts and nonces as ``int`` (read from the
    service's decimal strings), enums and consts as their plain type."""
    members: list[str] = []
    for variant in api.variants(prop):
        kind = type_of(variant, schemas)
        if kind not in members:
            members.append(kind)
    return " | ".join(sorted(members, key=lambda kind: kind == "None"))


def type_of(variant: dict[str, Any], schemas: dict[str, Any]) -> str:
    if "$ref" in variant:
        name = api.ref_name(variant["$ref"])
        if schemas[name].get("type") != "object":  # an enum: its values' type
            return type_of(schemas[name], schemas)
        return api.sdk_name(name)
    if "anyOf" in variant:
        return annotation(variant, schemas)
    kind = variant.get("type")
    if api.is_raw(variant):
        return "int"
    if kind == "array":
        return f"list[{type_of(variant.get('items', {}), schemas)}]"
    if kind == "object" or kind is None:
        values = variant.get("additionalProperties", True)
        value = "Any" if values is True or values == {} else type_of(values, schemas)
        return f"dict[str, {value}]"
    if kind in SCALARS:
        return SCALARS[kind]
    raise api.SpecError(f"no Python type for {variant}")


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def field_line(
    schemas: dict[str, Any], schema_name: str, key: str, prop: dict[str, Any], required: bool
) -> str:
    name, kind = snake(key), annotation(prop, schemas)
    if keyword.iskeyword(name):
        name += "_"
    alias = "" if re.sub(r"_([a-z0-9])", lambda m: m[1].upper(), name) == key else key
    default = api.ABSENT_FROM_OLDER_SERVERS.get((schema_name, key))
    if not required and "None" not in kind.split(" | ") and default is None:
        kind += " | None"
    if alias:
        value = "" if required else f", default={default!r}"
        return f"    {name}: {kind} = Field(alias={alias!r}{value})"
    return f"    {name}: {kind}" + ("" if required else f" = {default!r}")


def docstring(text: str, indent: str = "    ") -> list[str]:
    if not text:
        return []
    quoted = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(f'"""{quoted}"""', 96 - len(indent))
    return [indent + line for line in lines] + [""]


def model(name: str, schemas: dict[str, Any]) -> str:
    schema = schemas[name]
    lines = [f"class {api.sdk_name(name)}(_Model):", *docstring(api.description(schema))]
    fields = api.fields(name, schema)
    lines += [field_line(schemas, name, key, prop, required) for key, prop, required in fields]
    if not fields:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


def models_module(spec: dict[str, Any]) -> str:
    schemas = spec["components"]["schemas"]
    names = [
        name
        for name in api.answer_schemas(spec)
        if schemas[name].get("type") == "object" and name not in HAND_WRITTEN
    ]
    exported = ", ".join(f'"{api.sdk_name(name)}"' for name in sorted(names, key=api.sdk_name))
    parts = [
        HEADER + '"""The service\'s answers as typed models, one a schema of openapi.json\n'
        "(``invoicing_client.models`` re-exports them beside the models the client adds)."
        '"""\n\nfrom __future__ import annotations\n\nfrom typing import Any\n\n'
        "from pydantic import BaseModel, ConfigDict, Field\n"
        "from pydantic.alias_generators import to_camel\n\n"
        f"__all__ = [{exported}]\n",
        BASE_MODEL,
        *(model(name, schemas) for name in names),
    ]
    return "\n\n".join(parts)


def routes_module(spec: dict[str, Any]) -> str:
    rows = []
    for name, op in api.routes(spec).items():
        args = [repr(op.method), repr(op.path), repr(op.action)]
        if op.query:
            args.append("(" + "".join(f"{key!r}, " for key in op.query) + ")")
        rows.append(f"    {name!r}: Route({', '.join(args)}),")
    return (
        HEADER
        + '"""Every route of the service, named by the SDK method that calls it: each call is '
        'built\nfrom its row."""\n\nfrom __future__ import annotations\n\n'
        "from typing import NamedTuple\n\n\nclass Route(NamedTuple):\n"
        "    method: str\n"
        "    path: str  # with {placeholders} for path parameters\n"
        "    action: str | None  # the x-signature-action; None for the public routes\n"
        "    query: tuple[str, ...] = ()  # the query parameters it takes, besides ownerAddress\n"
        "\n\nROUTES: dict[str, Route] = {\n" + "\n".join(rows) + "\n}\n"
    )


def formatted(source: str, filename: str) -> str:
    """``source`` as ``make lint`` wants it: unused imports dropped, imports sorted, ruff
    format (the repository's ruff settings, read from ``filename``'s place)."""
    fix = ["check", "--select", "I,F401", "--fix", "--quiet", "--exit-zero"]
    for command in (fix, ["format", "--quiet"]):
        source = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", filename, "-"],
            input=source,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return source
