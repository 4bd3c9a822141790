"""How ``make test`` spreads the suite over pytest-xdist workers (``-n N --dist loadfile``).

Each worker is a pytest run of its own: it starts its own anvil and makes its own database
(``tests/conftest.py``), so what one test file shares between its tests (a module's database,
the chaos topology, the shared ``invoicing dev``, Chromium) must stay on one worker to be
built once. The unit of work is therefore a test file, or a group of files below that share
one expensive thing a worker starts on first use.

The units that take minutes go first, longest first (``LONGEST_FIRST``), then the other files
that hold a ``slow`` test, so that no worker starts a long test while the others have nothing
left to do; the fast files fill the end. Every other file keeps its place. A file whose tests
share nothing costly (each starts processes of its own) is split: each of its tests is a unit
(``ONE_UNIT_PER_TEST``), so that its minutes spread over the workers.

pytest-xdist's own ``--dist loadgroup`` would read ``xdist_group`` marks, but on pytest 9.2 it
groups nothing (it renames the tests' node ids, which pytest no longer lets it do), so the
groups are named here by path.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# A path prefix and the group of its files: one worker runs them all.
ONE_WORKER_GROUPS = {
    "tests/chaos/": "chaos topology",  # its package-scoped topology: 2 APIs, 2 workers, anvil
    "tests/browser/": "chromium",
    # The files that call tests.support.dev_service.shared_dev:
    "tests/clients/": "invoicing dev",
    "tests/acceptance/test_docs_quickstart.py": "invoicing dev",
    "tests/acceptance/test_js_client.py": "invoicing dev",
    "tests/acceptance/test_x402_dev.py": "invoicing dev",
    "tests/integration/test_woocommerce_plugin.py": "invoicing dev",
    # test_medusa_provider.py also calls shared_dev, but its suite alone takes minutes (`npm ci`,
    # a Medusa server): it is a unit of its own, and its worker starts an `invoicing dev` for it.
}

# Files whose tests each start their own processes and share nothing costly: one unit per test.
ONE_UNIT_PER_TEST = ("tests/integration/test_benches.py",)

# The units that take minutes on this machine class, longest first: they start before the
# rest, so that none of them is what a worker starts last (Medusa's suite, on the PostgreSQL
# run, takes 5 to 7 min alone; the others hold a dozen or more tests that start processes).
LONGEST_FIRST = (
    "tests/integration/test_medusa_provider.py",
    "chaos topology",
    "invoicing dev",
    "chromium",
)


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its file, the group its file belongs to, or the test itself
    in a file of ``ONE_UNIT_PER_TEST``."""
    path = nodeid.split("::", 1)[0]
    if path in ONE_UNIT_PER_TEST:
        return nodeid
    return next((g for prefix, g in ONE_WORKER_GROUPS.items() if path.startswith(prefix)), path)


def rank(unit: str, slow: set[str]) -> int:
    """Where a unit starts: those of ``LONGEST_FIRST`` in its order, then the other units that
    hold a slow test, then the rest."""
    if unit in LONGEST_FIRST:
        return LONGEST_FIRST.index(unit)
    return len(LONGEST_FIRST) + (unit not in slow)


class FileScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with ``unit_of`` as the scope, in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before pytest-xdist's own choice
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> FileScheduling | None:
    if config.getoption("dist") != "loadfile":
        return None  # another --dist asked for by hand: pytest-xdist's own
    config.option.loadscopereorder = False  # keep the order below, not the largest unit first
    return FileScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest units first, then the units with a ``slow`` test (each unit stays whole, so
    its fixtures are built once, in a plain run too)."""
    slow = {unit_of(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: rank(unit_of(item.nodeid), slow))
