"""The API reference page of the docs: every operation of openapi.json is on it, and every
link it renders points at a schema section it also renders."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_openapi", REPO / "scripts/docs_openapi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_operation_of_openapi_json_is_rendered() -> None:
    spec = json.loads((REPO / "openapi.json").read_text())
    page = _hook().render(spec)
    operations = {
        f"### `{method.upper()} {path}`"
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    rendered = {line for line in page.splitlines() if line.startswith("### `")}
    assert rendered == operations


def test_named_schemas_links_and_bounds() -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "T", "version": "1"},
        "paths": {
            "/things": {
                "post": {
                    "tags": ["things"],
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/New"}}
                        }
                    },
                    "responses": {
                        "201": {
                            "description": "made | kept",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/New"}}
                            },
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "New": {
                    "type": "object",
                    "required": ["feeBps"],
                    "properties": {
                        "feeBps": {"type": "integer", "minimum": 0.0, "maximum": 500},
                        "tags": {"type": "array", "items": {"type": "string", "maxLength": 9}},
                        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    },
                }
            }
        },
    }
    page = _hook().render(spec)
    assert "| `feeBps` | yes | integer (≥ 0, ≤ 500) |" in page
    assert "| `tags` | no | array of string (length ≤ 9) |" in page
    assert "| `note` | no | string or null |" in page
    assert "| 201 | made \\| kept | [New](#schema-new) |" in page
    anchors = set(re.findall(r"\{#([\w-]+)\}", page))
    links = set(re.findall(r"\]\(#([\w-]+)\)", page))
    assert links == anchors == {"schema-new"}
