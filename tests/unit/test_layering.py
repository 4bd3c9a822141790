"""The package's layers: the HTTP layer (``invoicing.api``) sits on top of the domain and is
imported only by the entry points that serve it; the payment page and the domain never
import it (STYLE.md, "Layout shows the architecture")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "invoicing"
# The commands that build and serve the app may import ``invoicing.api.app``, nothing else.
ENTRY_POINTS = {"cli/dev.py", "cli/serve.py"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_only_the_http_layer_and_entry_points_import_the_http_layer() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "api":
            continue
        allowed = {"invoicing.api.app"} if str(relative) in ENTRY_POINTS else set()
        bad = {m for m in imported_modules(path) if m.startswith("invoicing.api")} - allowed
        if bad:
            offenders[str(relative)] = sorted(bad)
    assert offenders == {}
