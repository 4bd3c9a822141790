"""Unit-test fixtures: a real local HTTP endpoint for the webhook client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.local_http import LocalServer


@pytest.fixture
async def server() -> AsyncIterator[LocalServer]:
    local = LocalServer()
    listener = await asyncio.start_server(local.handle, "127.0.0.1", 0)
    local.port = listener.sockets[0].getsockname()[1]
    yield local
    listener.close()
