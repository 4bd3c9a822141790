"""The bottom floors of the package import only what lies below them, counting imports made
inside functions and under ``TYPE_CHECKING``: the metrics and the database import nothing of
the service's, the chain package stands on the addresses, errors, hashing, metrics and the
registry, the settings on the chain package, the owners-list parser and the setting values
parsers (which import nothing of the service's), and the services on
those (the floors of the whole package, and its circles: ``test_structure``)."""

from __future__ import annotations

from pathlib import Path

from tests.support.imports import PACKAGE, module_name, our_imports

# Module (or package, ending in "/") → the modules of ours it may import (prefixes).
FLOORS: dict[str, tuple[str, ...]] = {
    "metrics.py": (),
    "db/": ("invoicing.db",),
    "chain/": (
        "invoicing.chain",
        "invoicing.addresses",
        "invoicing.errors",
        "invoicing.hashing",
        "invoicing.metrics",
        "invoicing.registry",
    ),
    "setting_values.py": (),
    "settings.py": ("invoicing.chain", "invoicing.auth.admission", "invoicing.setting_values"),
    "services.py": ("invoicing.chain", "invoicing.clock", "invoicing.db", "invoicing.settings"),
}


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
