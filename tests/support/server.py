"""Serving the real app over real HTTP inside a test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that were all free a moment ago (``invoicing
    dev --chains N`` listens on chain-port, chain-port+1, …; a port the OS picked alone may have
    a busy neighbour, the likelier the more tests run at once)."""
    while True:
        first = free_port()
        with contextlib.ExitStack() as held:
            try:
                for port in range(first, first + count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return first


@asynccontextmanager
async def serve(
    app: FastAPI, port: int | None = None, keep_alive_s: float = 5
) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 (idle connections closed after ``keep_alive_s``);
    yields its base URL."""
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", proxy_headers=False
    )
    config.timeout_keep_alive = keep_alive_s  # type: ignore[assignment]  # seconds, any float
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
