"""Unit tests run on the fakes that ship beside each interface (``FakeChain``, ``FakeClock``,
the webhook client's injectable resolver and connect step, and a bare local HTTP endpoint for
it): no database, no anvil, no app server. A test that needs one of those belongs in
``tests/integration``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.local_http import LocalServer

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


@pytest.fixture
async def server() -> AsyncIterator[LocalServer]:
    """A local HTTP endpoint for the webhook client (answers as each test tells it)."""
    local = LocalServer()
    listener = await asyncio.start_server(local.handle, "127.0.0.1", 0)
    local.port = listener.sockets[0].getsockname()[1]
    yield local
    listener.close()
