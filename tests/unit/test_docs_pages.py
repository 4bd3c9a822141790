"""The docs pages that list what the code accepts list exactly that: every setting with its
default (docs/operations/configuration.md) and every signature action with its route
(docs/integration/authentication.md), against the settings classes and openapi.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic_core import PydanticUndefined

from invoicing.chain.anvil import ANVIL_BIN_ENV
from invoicing.logs import LogSettings
from invoicing.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs/operations/configuration.md"
AUTHENTICATION = ROOT / "docs/integration/authentication.md"


def documented_settings() -> dict[str, str]:
    """Each ``INVOICING_*`` row of the configuration page: variable → its default cell."""
    rows = re.findall(r"^\| `(INVOICING_\w+)`[^|]*\| ([^|]*) \|", CONFIGURATION.read_text(), re.M)
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), "a setting is listed twice"
    return dict(rows)


def settings_in_code() -> dict[str, Any]:
    """Every variable the service reads: variable → its default (PydanticUndefined: none)."""
    fields = {**Settings.model_fields, **LogSettings.model_fields}
    found: dict[str, Any] = {
        f"INVOICING_{name.upper()}": field.default for name, field in fields.items()
    }
    found[ANVIL_BIN_ENV] = None
    return found


def shown(default: Any) -> str | None:
    """How the page writes a plain default in its backticks (None: not a plain value)."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    if isinstance(default, int | float) or (isinstance(default, str) and default):
        return str(default)
    return None


def test_the_configuration_page_names_every_setting_and_nothing_else() -> None:
    assert set(documented_settings()) == set(settings_in_code())


def test_the_configuration_page_gives_each_plain_default_exactly() -> None:
    documented = documented_settings()
    for name, default in settings_in_code().items():
        cell = documented[name]
        if default is None or default == "" or default is PydanticUndefined:
            assert cell.startswith("–"), (name, cell)
        elif (expected := shown(default)) is not None:
            assert cell == f"`{expected}`", (name, cell, expected)


def test_the_readme_leaves_configuration_to_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()

    assert re.findall(r"INVOICING_\w+", readme) == []
    assert len(readme.splitlines()) <= 250  # the pitch, two commands, a quickstart, links


def documented_actions() -> set[tuple[str, str]]:
    """(action, "METHOD /path") of each row of the authentication page's action table."""
    rows = re.findall(
        r"^\| `([a-z_]+\.[a-z_-]+)` \| `([A-Z]+ /[^`]+)`", AUTHENTICATION.read_text(), re.M
    )
    return set(rows)


def actions_in_code() -> set[tuple[str, str]]:
    """(action, "METHOD /path") of every route whose request signature signs an action."""
    schema = json.loads((ROOT / "openapi.json").read_text())
    return {
        (operation["x-signature-action"], f"{method.upper()} {path}")
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict) and "x-signature-action" in operation
    }


def test_the_action_table_lists_every_action_the_code_accepts() -> None:
    in_code = actions_in_code()

    assert ("invoice.create", "POST /integration/invoices") in in_code
    assert documented_actions() == in_code


# A citation of a document the repository does not hold: a design section, a section of the
# interface text, an issue number, a path outside the repository. (Spelt so that this file
# does not match itself.)
OUTSIDE_CITATION = re.compile(
    r"\bDES[I]GN\b|\b[Ss]pec (?:section )?\d|\b[Ss]pec's\b"
    r"|\b[Ii]ssue #?\d|\.\./shar[e]d|\bSTYL[E]\.md"
)
CITING_TREES = ("src", "tests", "bench", "clients", "examples", "scripts", "docs", "contracts")
SKIPPED = ("node_modules", "egg-info", "__pycache__", "artifacts")


def test_nothing_cites_a_document_outside_the_repository() -> None:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / ".ci/run", ROOT / "openapi.json"]
    for tree in CITING_TREES:
        files += [
            path
            for path in (ROOT / tree).rglob("*")
            if path.suffix in (".py", ".mjs", ".js", ".ts", ".md", ".sol", ".toml")
            and not any(part in SKIPPED for part in path.parts)
        ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE_CITATION.search(line)
    ]

    assert found == []
