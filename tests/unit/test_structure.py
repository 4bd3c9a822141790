"""The shape of the package, read from its imports with ``ast`` (imports inside functions and
under ``TYPE_CHECKING`` count as any other):

- no module reaches itself again through its imports;
- no module exceeds ``MAX_LINES`` lines (the migrations excepted: Alembic writes them);
- no import sits inside a function unless ``IMPORTS_IN_FUNCTIONS`` names it with its reason
  (none may serve to dodge a circle: the first rule counts them);
- the package stands on the floors of ``FLOORS``: a module imports what lies on lower floors,
  and an import that runs up a floor (or across one) is named in the docstring of the module
  it leaves, with its reason (the module's docstring says "runs up" and names the imported
  module as ``package.module``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.support.imports import (
    circles,
    imports_in_functions,
    our_imports,
    package_modules,
)

MAX_LINES = 400

# The package's floors, from the ground up: each names top-level modules and packages (a
# package is one unit: its modules import each other freely, without circles). Every unit of
# the package stands on one floor.
FLOORS: list[set[str]] = [
    {
        "clock",
        "coalescer",
        "db",
        "errors",
        "hashing",
        "logs",
        "metrics",
        "outbound",
        "registry",
        "runtime",
        "setting_values",
    },
    {"addresses", "migrate", "outage", "tables"},
    {"auth", "brand", "chain", "ratelimit"},
    {"pricing", "settings"},
    {"services"},
    {"gauges", "notifications"},
    {"invoices"},
    {"reports", "settlement"},
    {"fees", "housekeeping", "monitor", "payments", "recovery", "refunds"},
    {"actions", "models", "workers"},
    {"web"},
    {"cli"},
]

# (importing module, imported module) → why the import waits for the function to run.
IMPORTS_IN_FUNCTIONS: dict[tuple[str, str], str] = {}


def unit(module: str) -> str:
    """``invoicing.chain.rpc`` → ``chain``; the package's own ``__init__`` → ``invoicing``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor(module: str) -> int:
    return next(i for i, units in enumerate(FLOORS) if unit(module) in units)


@functools.cache
def graph() -> dict[str, set[str]]:
    return {name: our_imports(path) for name, path in package_modules().items()}


def test_no_module_reaches_itself_through_its_imports() -> None:
    assert circles(graph()) == []


def test_no_module_exceeds_the_line_limit() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in package_modules().items()}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}


def test_every_import_inside_a_function_is_named_with_its_reason() -> None:
    found = {
        (name, imported)
        for name, path in package_modules().items()
        for imported in imports_in_functions(path)
    }
    assert found == IMPORTS_IN_FUNCTIONS.keys()
    assert all(reason.strip() for reason in IMPORTS_IN_FUNCTIONS.values())


def test_every_unit_of_the_package_stands_on_one_floor() -> None:
    units = {unit(name) for name in package_modules()} - {"invoicing"}
    placed = [name for units_of_floor in FLOORS for name in units_of_floor]
    assert sorted(placed) == sorted(set(placed))  # none on two floors
    assert units == set(placed)


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def test_every_import_that_runs_up_is_named_with_its_reason_where_it_leaves() -> None:
    unnamed = {}
    for name, path in package_modules().items():
        up = {
            imported
            for imported in graph()[name]
            if unit(imported) not in (unit(name), "invoicing") and floor(imported) >= floor(name)
        }
        text = " ".join(docstring(path).split())
        said = re.search(r"\bruns? up\b", text) is not None
        bad = {m for m in up if not said or f"``{m.removeprefix('invoicing.')}``" not in text}
        if bad:
            unnamed[name] = sorted(bad)
    assert unnamed == {}


def test_each_unit_stands_right_above_what_it_imports() -> None:
    """A floor is the one above the highest floor a unit imports down to (the ground for a
    unit that imports none of ours): the list follows the imports, not the other way round."""
    below: dict[str, set[int]] = {}
    for name, imports in graph().items():
        if unit(name) != "invoicing":
            floors = {floor(m) for m in imports if unit(m) != "invoicing"}
            below.setdefault(unit(name), set()).update(f for f in floors if f < floor(name))
    misplaced = {
        name: (floor(f"invoicing.{name}"), max(floors, default=-1) + 1)
        for name, floors in below.items()
        if floor(f"invoicing.{name}") != max(floors, default=-1) + 1
    }
    assert misplaced == {}
