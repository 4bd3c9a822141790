"""Unit tests run on the fakes that ship beside each interface (``FakeChain``, ``FakeClock``,
the webhook client's injectable connect step): no database, no anvil, no server. A test
that needs one of those belongs in ``tests/integration``."""

from __future__ import annotations

import pytest

REAL_THINGS = {"database_url", "anvil", "evm", "dev", "factory", "make_services", "app"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/unit/" not in item.nodeid:
            continue
        used = REAL_THINGS.intersection(getattr(item, "fixturenames", ()))
        if used:
            raise pytest.UsageError(
                f"{item.nodeid} uses {', '.join(sorted(used))}: move it to tests/integration"
            )
