"""Checking live responses against the committed ``openapi.json`` (JSON Schema 2020-12)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.json"


@cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OPENAPI.read_text())
    return loaded


def _path_template(path: str) -> str | None:
    for template in document()["paths"]:
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path):
            return template
    return None


@cache
def _validator(template: str, method: str, status: str, media_type: str) -> Any:
    response = document()["paths"][template][method]["responses"][status]
    schema = response["content"][media_type]["schema"]
    return jsonschema_rs.validator_for({**schema, "components": document()["components"]})


@dataclass
class ResponseChecker:
    """Validates each response against what openapi.json documents for its route and
    status; records (METHOD path-template, status) seen and every problem found."""

    seen: set[tuple[str, str]] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def check(self, method: str, path: str, status: int, content_type: str, body: bytes) -> None:
        template = _path_template(path)
        where = f"{method} {path} → {status}"
        if template is None or method.lower() not in document()["paths"][template]:
            self.problems.append(f"{where}: route not documented")
            return
        operation = document()["paths"][template][method.lower()]
        self.seen.add((f"{method} {template}", str(status)))
        if str(status) not in operation["responses"]:
            self.problems.append(f"{where}: status not documented")
            return
        media_type = content_type.split(";")[0].strip()
        content = operation["responses"][str(status)].get("content", {})
        if media_type not in content:
            self.problems.append(f"{where}: {media_type} not documented")
            return
        if media_type != "application/json":
            return
        errors = [
            f"{error.instance_path}: {error.message}"
            for error in _validator(template, method.lower(), str(status), media_type).iter_errors(
                json.loads(body)
            )
        ]
        if errors:
            self.problems.append(f"{where}: {errors[:3]}")

    def hook(self) -> Callable[[httpx.Response], Any]:
        """An httpx ``response`` event hook (async client) that checks every response."""

        async def on_response(response: httpx.Response) -> None:
            await response.aread()
            self.check(
                response.request.method,
                response.request.url.path,
                response.status_code,
                response.headers.get("content-type", ""),
                response.content,
            )

        return on_response
