"""Both SDKs' models and routes, generated from the service's ``openapi.json``.

    make sdk                                   # rewrite the generated files
    python -m clients.sdkgen --check           # exit 1 when one is out of date
    python -m clients.sdkgen --out DIR         # write them under DIR instead

What is generated (every file says so in its first line): the Python SDK's
``invoicing_client/_generated/`` (``models.py``, ``routes.py``) and the JavaScript SDK's
``src/generated/`` (``models.d.ts``, ``routes.js``). Each route names its SDK methods in
``x-sdk-methods`` (``documented(..., sdk="resource.method")`` in the service); the methods
themselves, signing, webhook verification, the transports and pagination are written by
hand. ``tests/unit/test_sdk_generated.py`` fails when the committed files differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import python, typescript

REPO = Path(__file__).resolve().parents[2]
PYTHON = "clients/python/src/invoicing_client/_generated"
JS = "clients/js/src/generated"
PACKAGE_DOC = (
    python.HEADER + '"""What ``make sdk`` writes from openapi.json: the models and the routes."""\n'
)


def generate(spec: dict[str, Any]) -> dict[str, str]:
    """Every generated file's path (from the repository's root) and text."""
    return {
        f"{PYTHON}/__init__.py": PACKAGE_DOC,
        f"{PYTHON}/models.py": python.formatted(
            python.models_module(spec), str(REPO / PYTHON / "models.py")
        ),
        f"{PYTHON}/routes.py": python.formatted(
            python.routes_module(spec), str(REPO / PYTHON / "routes.py")
        ),
        f"{JS}/models.d.ts": typescript.models_module(spec),
        f"{JS}/routes.js": typescript.routes_module(spec),
    }


def generate_from(path: Path) -> dict[str, str]:
    return generate(json.loads(path.read_text()))
