"""The package's layers: the web layer (``invoicing.web``: the API, the payment page and every
other HTTP surface) sits on top of the domain and is imported only by the entry points that
serve it; the domain never imports it, nor the HTTP libraries the web layer is built on
(docs/architecture.md, CONTRIBUTING.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "invoicing"
WEB = "invoicing.web"
# The commands that build and serve the app may import ``invoicing.web.app``, nothing else.
ENTRY_POINTS = {"cli/dev.py", "cli/serve.py"}
# What serves HTTP: only the web layer uses these (the entry points also run the server).
HTTP_LIBRARIES = ("fastapi", "starlette")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def is_method_routes(relative: Path) -> bool:
    """A payment method's routes (``payments/<method>/routes.py`` or ``*_routes.py``): web-layer
    modules kept in the method's folder."""
    parts = relative.parts
    return (
        len(parts) == 3
        and parts[0] == "payments"
        and (parts[2] == "routes.py" or parts[2].endswith("_routes.py"))
    )


def in_the_web_layer(relative: Path) -> bool:
    return relative.parts[0] == "web" or is_method_routes(relative)


def below_the_web_layer() -> dict[str, set[str]]:
    """Each module outside the web layer and the modules it imports (inside functions too)."""
    return {
        str(path.relative_to(PACKAGE)): imported_modules(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if not in_the_web_layer(path.relative_to(PACKAGE))
    }


def test_only_the_web_layer_imports_a_payment_methods_routes() -> None:
    routes = {
        "invoicing." + str(path.relative_to(PACKAGE).with_suffix("")).replace("/", ".")
        for path in PACKAGE.rglob("*.py")
        if is_method_routes(path.relative_to(PACKAGE))
    }
    assert routes  # the two methods of today have routes
    offenders = {
        module: sorted(imports & routes)
        for module, imports in below_the_web_layer().items()
        if imports & routes
    }
    assert offenders == {}


def test_only_entry_points_import_the_web_layer_and_only_its_app() -> None:
    offenders = {}
    for module, imports in below_the_web_layer().items():
        allowed = {f"{WEB}.app"} if module in ENTRY_POINTS else set()
        bad = {m for m in imports if m == WEB or m.startswith(f"{WEB}.")} - allowed
        if bad:
            offenders[module] = sorted(bad)
    assert offenders == {}


def test_the_domain_does_not_speak_http() -> None:
    """Request helpers (the app's services, the client address) live in the web layer."""
    offenders = {}
    for module, imports in below_the_web_layer().items():
        bad = {m for m in imports if m.split(".")[0] in HTTP_LIBRARIES}
        if bad:
            offenders[module] = sorted(bad)
    assert offenders == {}


def test_the_layer_holds_every_http_surface() -> None:
    """The API, the payment page and their shared parts are found under ``web/``, and no
    HTTP module is left at the package's top."""
    assert not (PACKAGE / "api").exists() and not (PACKAGE / "page").exists()
    assert not (PACKAGE / "routedocs.py").exists()
    routers = {
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*.py")
        if "APIRouter(" in path.read_text()
    }
    assert routers and all(in_the_web_layer(router) for router in routers), routers


# The tables layer: every table is declared in ``invoicing.tables`` (or, for a payment
# method's own tables, in ``payments/<method>/models.py``), just above ``invoicing.db``, so a
# read model may join any tables without importing from a package above its own.
TABLES = "invoicing.tables"


def package_of(relative: Path) -> str:
    """The top-level package (or module) a file belongs to; a method's routes count as web."""
    return "web" if in_the_web_layer(relative) else relative.parts[0].removesuffix(".py")


def test_the_tables_layer_imports_only_the_database() -> None:
    offenders = {}
    for path in sorted((PACKAGE / "tables").rglob("*.py")):
        ours = {m for m in imported_modules(path) if m.startswith("invoicing")}
        bad = {m for m in ours if m != "invoicing.db" and not m.startswith(f"{TABLES}.")}
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = sorted(bad)
    assert offenders == {}


def test_every_table_is_declared_in_the_tables_layer() -> None:
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        method_tables = relative.parts[0] == "payments" and relative.name == "models.py"
        if relative.parts[0] == "tables" or method_tables:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "Base" for base in node.bases
            ):
                outside.append(f"{relative}:{node.name}")
    assert outside == []


def test_no_import_climbs_back_up() -> None:
    """The packages form layers: no package imports one that (through others) imports it."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        source = package_of(relative)
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] != "invoicing" or len(parts) < 2:
                continue
            target = parts[1]
            if target == "web" or (target == "payments" and parts[-1].endswith("routes")):
                target = "web"
            if target != source:
                graph.setdefault(source, set()).add(target)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            if here == goal:
                return True
            if here not in seen:
                seen.add(here)
                todo.extend(graph.get(here, ()))
        return False

    climbing = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if reaches(target, source)
    )
    assert climbing == []
