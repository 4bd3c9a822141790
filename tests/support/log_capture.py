"""The ``captured`` fixture: the service's JSON logs at DEBUG into a buffer.

The fixture is imported by the test modules that use it."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from invoicing import logs


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Logging as ``INVOICING_LOG_FORMAT=json INVOICING_LOG_LEVEL=DEBUG`` sets it up, into a
    buffer; the previous set-up comes back afterwards."""
    root = logging.getLogger()
    saved_root = (list(root.handlers), root.level)
    named = ("httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {n: (list(logging.getLogger(n).handlers), logging.getLogger(n).level) for n in named}
    saved_propagate = {n: logging.getLogger(n).propagate for n in named}
    buffer = io.StringIO()
    logs.configure(logs.LogSettings(log_format="json", log_level="DEBUG"), stream=buffer)
    try:
        yield buffer
    finally:
        root.handlers[:], root.level = saved_root
        for name, (handlers, level) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = saved_propagate[name]
