"""No test module imports another: what tests share lives in ``tests/support`` (or a
``conftest.py``), so a test file can be moved, renamed or run alone without dragging
another file's tests, fixtures and module-scoped state into its run.

Read with ``ast`` over every module under ``tests/``: an import anywhere in a file counts,
in any of its forms (``import tests.x.test_y``, ``from tests.x.test_y import z``,
``from tests.x import test_y``, relative ones).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def module_of(path: Path) -> str:
    """``tests/integration/test_fees.py`` → ``tests.integration.test_fees``."""
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    return module_of(path.parent)


def modules_of_tests() -> set[str]:
    return {module_of(path) for path in TESTS.rglob("test_*.py")}


def imported_modules(source: str, package: str) -> set[str]:
    """Every module name an import of ``source`` (a module of ``package``) may load, made
    absolute: for ``from a.b import c`` both ``a.b`` and ``a.b.c`` (``c`` may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def test_no_module_of_the_tests_imports_a_test_module() -> None:
    tests = modules_of_tests()
    offending = {
        module_of(path): sorted(imported_modules(path.read_text(), package_of(path)) & tests)
        for path in sorted(TESTS.rglob("*.py"))
    }
    assert {name: found for name, found in offending.items() if found} == {}


def test_the_scan_sees_every_form_of_import() -> None:
    """The reader above on each form of import, as a module of ``tests.integration``."""
    forms = [
        "import tests.integration.test_fees",
        "import tests.integration.test_fees as fees",
        "from tests.integration.test_fees import relayer_tx_count",
        "from tests.integration import test_fees",
        "from .test_fees import relayer_tx_count",
        "from . import test_fees",
        "from ..integration.test_fees import relayer_tx_count",
        "def f():\n    from tests.integration.test_fees import relayer_tx_count",
    ]
    for form in forms:
        assert "tests.integration.test_fees" in imported_modules(form, "tests.integration"), form
    assert "tests.integration.test_fees" not in imported_modules(
        "from tests.support.withdrawals import settle_all", "tests.integration"
    )
