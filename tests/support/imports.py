"""The package's imports as ``ast`` reads them, for the tests that hold its structure: every
import counts, at the top of a module, inside a function or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "invoicing"


def module_name(path: Path) -> str:
    """``src/invoicing/chain/rpc.py`` → ``invoicing.chain.rpc`` (a package by its folder)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_our_module(name: str) -> bool:
    place = PACKAGE.parent / name.replace(".", "/")
    return name.startswith("invoicing.") and (place.is_dir() or place.with_suffix(".py").exists())


def imported_by(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules of ours that one import statement imports: ``from invoicing import metrics``
    imports ``invoicing.metrics``, ``from invoicing.chain.rpc import JsonRpc`` the module
    ``invoicing.chain.rpc``."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if is_our_module(alias.name)}
    assert node.level == 0, "the package imports itself by absolute names only"
    found = set()
    for alias in node.names:
        submodule = f"{node.module}.{alias.name}"
        found.add(submodule if is_our_module(submodule) else str(node.module))
    return {name for name in found if is_our_module(name)}


def our_imports(path: Path) -> set[str]:
    """The modules of ours that ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found |= imported_by(node)
    return found


def imports_in_functions(path: Path) -> set[str]:
    """The modules of ours that ``path`` imports inside a function's body."""
    found: set[str] = set()
    for function in ast.walk(ast.parse(path.read_text())):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found |= imported_by(node)
    return found


def package_modules() -> dict[str, Path]:
    """Every module of the package but its migrations (Alembic's, run by Alembic alone)."""
    return {
        module_name(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "migrations"
    }


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The circles of ``graph``, each once, as the path that closes it."""
    done: set[str] = set()

    def circle_from(name: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in path:
            return (*path[path.index(name) :], name)
        if name in done:
            return None
        for imported in sorted(graph.get(name, set())):
            circle = circle_from(imported, (*path, name))
            if circle is not None:
                return circle
        done.add(name)
        return None

    found: dict[frozenset[str], tuple[str, ...]] = {}
    for name in sorted(graph):
        circle = circle_from(name, ())
        if circle is not None:
            found.setdefault(frozenset(circle), circle)
    return list(found.values())
