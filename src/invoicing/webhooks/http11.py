"""A small HTTP/1.1 POST client on asyncio streams, with keep-alive connections per target.

Webhook delivery needs little of HTTP: one POST, the status code, no redirects. A general
client's connection pool costs more than the request itself at a thousand deliveries a
second, so this one keeps idle connections in a dict keyed by (address, port, TLS name).
Connections go to the address the SSRF guard checked; the TLS name (SNI and certificate
check) and the Host header stay the URL's host name.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict
from collections.abc import Awaitable, Callable

from invoicing.webhooks.guard import Target

# Answers longer than this are not read to the end; their connection is dropped instead.
MAX_ANSWER_BYTES = 64 * 1024
MAX_IDLE_PER_TARGET = 32

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Connect = Callable[[str, int, str | None], Awaitable[Streams]]


class ProtocolError(ConnectionError):
    """The endpoint's answer is not HTTP/1.x."""


async def open_streams(address: str, port: int, tls_name: str | None) -> Streams:
    """Open a TCP (or TLS, verified against ``tls_name``) connection to ``address``."""
    if tls_name is None:
        return await asyncio.open_connection(address, port, limit=MAX_ANSWER_BYTES)
    context = ssl.create_default_context()
    return await asyncio.open_connection(
        address, port, ssl=context, server_hostname=tls_name, limit=MAX_ANSWER_BYTES
    )


def _request_head(target: Target, headers: dict[str, str], length: int) -> bytes:
    lines = [f"POST {target.path} HTTP/1.1", f"Host: {target.host_header}"]
    for name, value in headers.items():
        if name.lower() in ("host", "content-length", "connection", "transfer-encoding"):
            continue
        if any(c in name + value for c in "\r\n\0"):
            raise ValueError(f"header {name!r} contains a line break")
        lines.append(f"{name}: {value}")
    lines += [f"Content-Length: {length}", "Connection: keep-alive", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status code, whether the connection can be reused) of one answer."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(parts[1])
        if status >= 200 or status < 100:
            break  # 1xx answers are followed by the real one
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    reusable = headers.get("connection") != "close" and parts[0] == "HTTP/1.1"
    if "chunked" in headers.get("transfer-encoding", ""):
        return status, reusable and await _skip_chunks(reader)
    length = headers.get("content-length")
    if length is None or not length.isdigit():
        return status, status in (204, 304)
    if int(length) > MAX_ANSWER_BYTES:
        return status, False
    await reader.readexactly(int(length))
    return status, reusable


async def _skip_chunks(reader: asyncio.StreamReader) -> bool:
    """Read a chunked body to its end; False when it is too long to bother."""
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
        total += size
        if total > MAX_ANSWER_BYTES:
            return False
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return True
        await reader.readexactly(size + 2)


class ConnectionPool:
    """Keep-alive connections by target; ``post`` never shares a connection at once."""

    def __init__(self, connect: Connect = open_streams) -> None:
        self.connect = connect
        self._idle: dict[tuple[str, int, str | None], list[Streams]] = defaultdict(list)

    async def post(self, target: Target, headers: dict[str, str], body: bytes) -> int:
        """Send one POST and return the answer's status code."""
        key = (target.addresses[0], target.port, target.tls_name)
        request = _request_head(target, headers, len(body)) + body
        streams = self._take_idle(key)
        if streams is not None:
            try:
                return await self._exchange(key, streams, request)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the endpoint closed the idle connection: try once on a new one
        streams = await self.connect(target.addresses[0], target.port, target.tls_name)
        return await self._exchange(key, streams, request)

    async def _exchange(
        self, key: tuple[str, int, str | None], streams: Streams, request: bytes
    ) -> int:
        reader, writer = streams
        reusable = False
        try:
            writer.write(request)
            await writer.drain()
            status, reusable = await _read_answer(reader)
            return status
        except asyncio.LimitOverrunError as exc:
            raise ProtocolError("answer headers are too long") from exc
        finally:
            if reusable and len(self._idle[key]) < MAX_IDLE_PER_TARGET:
                self._idle[key].append(streams)
            else:
                writer.close()

    def _take_idle(self, key: tuple[str, int, str | None]) -> Streams | None:
        idle = self._idle.get(key)
        while idle:
            reader, writer = idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return None

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()
        self._idle.clear()
