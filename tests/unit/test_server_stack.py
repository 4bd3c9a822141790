"""`invoicing serve` runs uvicorn with its defaults, which pick the C HTTP parser (httptools)
and uvloop when they are installed: both are dependencies, and these tests fail if either
goes missing and uvicorn falls back to h11 or asyncio's own loop (about a quarter slower on a
status lookup; docs/operations/scaling.md)."""

from __future__ import annotations

import sys

import pytest
from fastapi import FastAPI
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _loaded(**options: str) -> Config:
    config = Config(FastAPI(), **options)  # type: ignore[arg-type]
    config.load()
    return config


def test_the_default_http_protocol_is_httptools() -> None:
    assert _loaded().http_protocol_class is HttpToolsProtocol


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not build on Windows")
def test_the_default_event_loop_is_uvloop() -> None:
    factory = _loaded().get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_h11_is_what_the_fallback_would_be() -> None:
    # The check above can fail: naming h11 gives another protocol class.
    assert _loaded(http="h11").http_protocol_class is not HttpToolsProtocol
