"""MkDocs hook: the API reference page, rendered from the committed ``openapi.json``.

A page holding the line ``<!-- openapi.json -->`` gets, in its place, every operation
(grouped by tag: parameters, request body, responses), the security schemes and the named
schemas, as plain Markdown. It reads only the local file, so the site builds offline, and
``mkdocs build --strict`` fails when a rendered link points at a schema that is not there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = "<!-- openapi.json -->"
METHODS = ("get", "post", "put", "patch", "delete")
CONSTRAINTS = {
    "minimum": "≥ {}",
    "maximum": "≤ {}",
    "exclusiveMinimum": "> {}",
    "exclusiveMaximum": "< {}",
    "minLength": "length ≥ {}",
    "maxLength": "length ≤ {}",
    "pattern": "pattern `{}`",
    "format": "format {}",
    "default": "default `{}`",
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    spec_path = Path(config["config_file_path"]).parent / "openapi.json"
    spec = json.loads(spec_path.read_text())
    return markdown.replace(MARKER, render(spec))


def render(spec: dict[str, Any]) -> str:
    info = spec.get("info", {})
    lines = [f"*{info.get('title', 'API')} {info.get('version', '')}, OpenAPI {spec['openapi']}.*"]
    if info.get("description"):
        lines += ["", info["description"]]
    lines += _security_schemes(spec)
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((method, path, operation))
    for tag, operations in by_tag.items():
        lines += ["", f"## {tag.capitalize()}"]
        for method, path, operation in operations:
            lines += _operation(method, path, operation)
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["", "## Schemas"]
        for name, schema in schemas.items():
            lines += ["", f"### {name} {{#{_anchor(name)}}}"]
            if schema.get("description"):
                lines += ["", _one_line(schema["description"])]
            lines += _fields(schema)
    return "\n".join(lines) + "\n"


def _security_schemes(spec: dict[str, Any]) -> list[str]:
    schemes = spec.get("components", {}).get("securitySchemes", {})
    if not schemes:
        return []
    lines = ["", "## Authentication schemes", "", "| scheme | kind | where | description |"]
    lines.append("|---|---|---|---|")
    for name, scheme in schemes.items():
        where = f"{scheme.get('in', '')} `{scheme['name']}`" if "name" in scheme else ""
        description = _cell(scheme.get("description", ""))
        lines.append(f"| `{name}` | {scheme.get('type', '')} | {where} | {description} |")
    return lines


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = ["", f"### `{method.upper()} {path}`"]
    if operation.get("summary"):
        lines += ["", f"**{operation['summary']}**"]
    if operation.get("description"):
        lines += ["", operation["description"].strip()]
    security = operation.get("security")
    if security is not None:
        options = [
            " + ".join(f"`{name}`" for name in requirement) or "none" for requirement in security
        ]
        lines += ["", "Authentication: " + (" or ".join(options) if options else "none")]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["", "| parameter | in | required | type |", "|---|---|---|---|"]
        for parameter in parameters:
            required = "yes" if parameter.get("required") else "no"
            kind = _type(parameter.get("schema", {}))
            if parameter.get("description"):
                kind += " — " + _cell(parameter["description"])
            lines.append(f"| `{parameter['name']}` | {parameter['in']} | {required} | {kind} |")
    body = operation.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += ["", f"Request body (`{media}`): {_type(content.get('schema', {}))}"]
        lines += _fields(content.get("schema", {}))
    responses = operation.get("responses", {})
    if responses:
        lines += ["", "| status | meaning | body |", "|---|---|---|"]
        for status, response in responses.items():
            schemas = [
                _type(content.get("schema", {})) for content in response.get("content", {}).values()
            ]
            description = _cell(response.get("description", ""))
            lines.append(f"| {status} | {description} | {', '.join(schemas) or '—'} |")
    return lines


def _fields(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties")
    if not properties:
        return []
    required = set(schema.get("required", ()))
    lines = ["", "| field | required | type |", "|---|---|---|"]
    for name, field in properties.items():
        kind = _type(field)
        if field.get("description"):
            kind += " — " + _cell(field["description"])
        lines.append(f"| `{name}` | {'yes' if name in required else 'no'} | {kind} |")
    return lines


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: its type, a link for a named schema, its constraints."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for combinator, word in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")):
        if combinator in schema:
            parts = [part for part in schema[combinator] if part] or [{}]  # {}: anything
            text = word.join(_type(part) for part in parts)
            return text + _constraints(schema)
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        kind = "array of " + _type(schema.get("items", {}))
    return f"{kind}{_constraints(schema)}"


def _constraints(schema: dict[str, Any]) -> str:
    found = [
        template.format(_cell(json.dumps(schema[key]) if key == "default" else _value(schema[key])))
        for key, template in CONSTRAINTS.items()
        if key in schema
    ]
    return f" ({', '.join(found)})" if found else ""


def _value(value: Any) -> str:
    """A bound as written: a whole float (``0.0``, ``1e+18``) as an integer while exact."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def _anchor(name: str) -> str:
    return "schema-" + "".join(ch.lower() if ch.isalnum() else "-" for ch in name)


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
