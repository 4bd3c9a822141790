"""A fault-injecting TCP proxy for the chaos suite: it forwards bytes both ways, and ``cut()``
severs every open connection and resets each new one until ``restore()``.

It knows nothing of the protocol, so it stands in front of an anvil node (JSON-RPC over HTTP)
as well as PostgreSQL. It runs its own event loop on a thread of its own, so the proxied
traffic keeps flowing while the test's loop is busy, and the test can cut and restore it from
any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHUNK_BYTES = 65536


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_host:target_port``; ``port`` is free-picked."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.is_cut = False
        self.accepted = 0  # connections accepted
        self.reset = 0  # of those, and of the open ones, severed by a cut
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def cut(self) -> float:
        """From now on, every connection is severed (open ones at once, new ones as they
        arrive, by a TCP reset). Returns the monotonic time of the cut."""
        asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result(10)
        return time.monotonic()

    def restore(self) -> float:
        """Forward again. Returns the monotonic time of the restore."""
        self.is_cut = False
        return time.monotonic()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        self.is_cut = True
        for writer in list(self._open):
            _reset(writer)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            _reset(writer)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.is_cut:
            _reset(client_w)
            self.reset += 1
            return
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(client_w)
            return
        self._open.update((client_w, server_w))
        try:
            await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
        finally:
            self._open.difference_update((client_w, server_w))
            if self.is_cut:
                self.reset += 1
            for writer in (client_w, server_w):
                with contextlib.suppress(Exception):
                    writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0): the peer sees the connection die, not end."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK_BYTES):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        # One side ended: end both, so neither end waits on a half-open connection.
        if reader.at_eof():
            writer.close()
        else:
            _reset(writer)


@contextmanager
def tcp_proxy(target_host: str, target_port: int) -> Iterator[TcpProxy]:
    """A running TcpProxy to the target, stopped afterwards."""
    proxy = TcpProxy(target_host, target_port).start()
    try:
        yield proxy
    finally:
        proxy.stop()
