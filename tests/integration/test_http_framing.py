"""What a stranger's malformed HTTP gets from the API process's parser (httptools, which
uvicorn picks): a request whose length is ambiguous (Content-Length with chunked encoding,
two Content-Lengths) or whose head is not HTTP is refused with 400 and its connection
closed, so nothing smuggled behind it is ever read as a request; no head of any bytes gets
a 5xx, and the process answers the next request."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing.chain.chains import ChainRegistry
from invoicing.db import Database
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.web.app import create_app
from tests.support.server import free_port

pytestmark = pytest.mark.integration

CREATE = b"POST /integration/invoices HTTP/1.1\r\nHost: shop.example\r\n"


@pytest.fixture(scope="module")
def address(database_url: str) -> Iterator[tuple[str, int]]:
    """The real app served by uvicorn as ``invoicing serve`` serves it, in a thread of its own
    (the property test below is synchronous)."""
    settings_ = Settings(environment="development", database_url=database_url)
    services = Services(settings=settings_, db=Database(database_url), chains=ChainRegistry({}))
    port = free_port()
    config = uvicorn.Config(
        create_app(services, run_workers_in_process=False),
        host="127.0.0.1",
        port=port,
        log_level="critical",
        proxy_headers=False,
    )
    server = uvicorn.Server(config)

    async def serve_then_close() -> None:  # on the server's loop, which holds the connections
        try:
            await server.serve()
        finally:
            await services.aclose()

    thread = threading.Thread(target=asyncio.run, args=(serve_then_close(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    yield "127.0.0.1", port
    server.should_exit = True
    thread.join(timeout=10)


def exchange(address: tuple[str, int], raw: bytes, end: bool = True) -> list[int]:
    """Send ``raw``, end our side (``end``), and read until the server closes: the status of
    every response it wrote."""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(raw)
        if end:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    # A response's status line follows the body before it with no line break between.
    return [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


def healthy(address: tuple[str, int]) -> bool:
    return exchange(address, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") == [
        200
    ]


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(
            b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", id="length-and-chunked"
        ),
        pytest.param(b"Content-Length: 4\r\nContent-Length: 43\r\n", id="two-lengths"),
        pytest.param(b"Content Length: 4\r\n", id="a-space-in-a-header-name"),
        pytest.param(b"Content-Length: -4\r\n", id="a-negative-length"),
    ],
)
def test_an_ambiguous_or_broken_head_is_refused_and_nothing_behind_it_is_read(
    address: tuple[str, int], head: bytes
) -> None:
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    statuses = exchange(address, CREATE + head + b"\r\n0\r\n\r\n" + smuggled)

    assert statuses == [400]
    assert healthy(address)


def test_a_plain_request_on_the_same_server_is_answered(address: tuple[str, int]) -> None:
    # The check above can fail: a well-formed request is read, and so is the one behind it.
    first = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert exchange(address, first + last, end=False) == [200, 200]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(head=st.binary(max_size=200), body=st.binary(max_size=64))
def test_no_head_of_any_bytes_gets_a_5xx(
    address: tuple[str, int], head: bytes, body: bytes
) -> None:
    statuses = exchange(address, CREATE + head + b"\r\n\r\n" + body)

    assert all(status < 500 for status in statuses), statuses
    assert healthy(address)
