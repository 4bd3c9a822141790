"""How ``make test`` spreads the suite over pytest-xdist workers (``-n N --dist loadfile``).

Each worker is a pytest run of its own: it starts its own anvil and makes its own database
(``tests/conftest.py``), so what one test file shares between its tests (a module's database,
the chaos topology, the shared ``invoicing dev``, Chromium) must stay on one worker to be
built once. The unit of work is therefore a test file, or a group of files below that share
one expensive thing a worker starts on first use.

Files that hold a ``slow`` test go first, so that no worker starts a long test while the
others have nothing left to do; the fast files fill the end. Every other file keeps its place.

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
    "tests/integration/test_medusa_provider.py": "invoicing dev",
}


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its file, or the group its file belongs to."""
    path = nodeid.split("::", 1)[0]
    return next((g for prefix, g in ONE_WORKER_GROUPS.items() if path.startswith(prefix)), path)


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
    """Files with a ``slow`` test first (each file stays whole, so its fixtures are built
    once, in a plain run too)."""
    slow = {unit_of(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: unit_of(item.nodeid) not in slow)
