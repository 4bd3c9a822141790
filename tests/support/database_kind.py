"""``--database-tests-only``: of the suite, only the tests whose outcome can depend on the
run's database kind (``INVOICING_TEST_DATABASE``).

CI runs the whole suite on SQLite and, side by side, this part of it on PostgreSQL: a test
that never opens a database of the run (the contracts on anvil, the unit tests on their
fakes, ``invoicing dev`` on its own SQLite file) would only run a second time, the same way.

A test uses a database of the run when one of these holds:
- its fixtures reach ``migrated_template`` (every migrated database of the run is a copy of
  it: ``database_url``, ``own_database``, ``module_database``, ``make_services``, ``app``...);
- one of its fixtures names ``new_database_url``, ``TEST_DATABASE`` or ``shared_dev`` in its
  body (the chaos topology, a fixture that makes its own empty database);
- its module imports one of those names (a test that makes a database itself, or starts the
  shared ``invoicing dev``, which runs on the run's database kind);
- it carries a ``skipif`` mark: it may be one that runs on PostgreSQL only;
unless it is marked ``any_database`` (a bench that takes no database, in a module of benches
that mostly do). Anything else runs in the SQLite suite alone.
"""

from __future__ import annotations

import pytest

OPTION = "--database-tests-only"
DATABASE_NAMES = frozenset({"new_database_url", "TEST_DATABASE", "shared_dev"})
_NO_CODE = compile("", "<none>", "exec")  # what a fixture without a code object names: nothing


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        action="store_true",
        help="run only the tests that use a database of the run (the rest cannot differ "
        "between SQLite and PostgreSQL)",
    )


def uses_the_database(item: pytest.Item) -> bool:
    """Whether ``item``'s outcome can depend on the database kind of the run (see above)."""
    if item.get_closest_marker("any_database") is not None:
        return False
    module = getattr(item, "module", None)
    if module is not None and DATABASE_NAMES.intersection(vars(module)):
        return True
    if item.get_closest_marker("skipif") is not None:
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True  # not a plain test function: keep it
    if "migrated_template" in info.names_closure:
        return True
    return any(
        DATABASE_NAMES.intersection(getattr(definition.func, "__code__", _NO_CODE).co_names)
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


@pytest.hookimpl(trylast=True)  # after the schedule's order: deselecting keeps it
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption(OPTION):
        return
    kept = [item for item in items if uses_the_database(item)]
    others = [item for item in items if not uses_the_database(item)]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = kept
