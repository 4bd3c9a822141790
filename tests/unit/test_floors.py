"""The bottom floors of the package import only what lies below them, counting imports made
inside functions and under ``TYPE_CHECKING``: the metrics and the database import nothing of
the service's, the chain package stands on the addresses, errors, hashing, metrics and the
registry, the settings on the chain package and the owners-list parser, and the services on
those. Among them, no module reaches itself again through its imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "invoicing"

# Module (or package, ending in "/") → the modules of ours it may import (prefixes).
FLOORS: dict[str, tuple[str, ...]] = {
    "metrics.py": (),
    "db.py": (),
    "chain/": (
        "invoicing.chain",
        "invoicing.addresses",
        "invoicing.errors",
        "invoicing.hashing",
        "invoicing.metrics",
        "invoicing.registry",
    ),
    "settings.py": ("invoicing.chain", "invoicing.auth.admission"),
    "services.py": ("invoicing.chain", "invoicing.clock", "invoicing.db", "invoicing.settings"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_our_module(name: str) -> bool:
    place = PACKAGE.parent / name.replace(".", "/")
    return name.startswith("invoicing.") and (place.is_dir() or place.with_suffix(".py").exists())


def our_imports(path: Path) -> set[str]:
    """The modules of ours that ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from invoicing import metrics`` imports the module invoicing.metrics.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if is_our_module(name)}


def floor_files() -> dict[str, Path]:
    """Every module of the floors above, by module name."""
    files = {}
    for place in FLOORS:
        paths = (
            sorted((PACKAGE / place).rglob("*.py")) if place.endswith("/") else [PACKAGE / place]
        )
        files.update({module_name(path): path for path in paths})
    return files


def allowed(path: Path) -> tuple[str, ...]:
    relative = path.relative_to(PACKAGE).as_posix()
    place = relative.split("/")[0] + "/" if "/" in relative else relative
    return FLOORS[place]


def test_each_floor_imports_only_what_lies_below_it() -> None:
    offenders = {}
    for name, path in floor_files().items():
        bad = {m for m in our_imports(path) if not m.startswith(allowed(path))}
        if bad:
            offenders[name] = sorted(bad)
    assert offenders == {}


def test_the_floors_hold_no_circle() -> None:
    files = floor_files()
    graph = {name: our_imports(path) & files.keys() for name, path in files.items()}
    done: set[str] = set()

    def circle_from(name: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in path:
            return (*path[path.index(name) :], name)
        if name in done:
            return None
        for imported in sorted(graph[name]):
            circle = circle_from(imported, (*path, name))
            if circle is not None:
                return circle
        done.add(name)
        return None

    circles = [circle for name in sorted(graph) if (circle := circle_from(name, ())) is not None]
    assert circles == []
