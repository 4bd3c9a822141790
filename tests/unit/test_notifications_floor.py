"""Notifications sit below the domains: nothing in ``notifications/`` imports a domain's
module (counting imports inside functions and under ``TYPE_CHECKING``); the invoices table
that ``claims`` reads (the paid webhook's credential) comes from the tables layer. The
owner's view of an invoice reads the refund and settlement tables, never their services."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "invoicing"
DOMAINS = ("invoicing.invoices", "invoicing.refunds", "invoicing.settlement", "invoicing.fees")
DOMAINS += ("invoicing.monitor", "invoicing.web")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports from, wherever the import statement stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def domain_imports(path: Path) -> set[str]:
    return {name for name in imported(path) if name.startswith(DOMAINS)}


def test_notifications_import_no_domain() -> None:
    found = {
        path.name: domain_imports(path)
        for path in sorted((PACKAGE / "notifications").glob("*.py"))
        if domain_imports(path)
    }

    assert found == {}
    assert "invoicing.tables.invoices" in imported(PACKAGE / "notifications" / "claims.py")


def test_the_owner_view_reads_refund_and_settlement_tables_not_services() -> None:
    found = domain_imports(PACKAGE / "invoices" / "owner_view.py")

    assert found == {
        "invoicing.invoices.coverage",
        "invoicing.invoices.payments",
        "invoicing.invoices.views",
    }
    read = imported(PACKAGE / "invoices" / "owner_view.py")
    tables = {name for name in read if ".tables." in name}
    assert tables == {
        "invoicing.tables.invoices",
        "invoicing.tables.refunds",
        "invoicing.tables.settlement",
    }
