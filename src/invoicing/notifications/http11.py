"""A small HTTP/1.1 POST client on asyncio streams, with keep-alive connections per address.

Webhook delivery needs little of HTTP: one POST, the status code, no redirects. A general
client's connection pool costs more than the request itself at thousands of deliveries a
second (``bench/webhook_clients.py`` measures this client against httpx and aiohttp; the
figures and the decision are in ``client.py``), so this one keeps idle connections in a dict
keyed by (address, port, TLS name). The TLS name (SNI and certificate check) and the Host
header stay the URL's host name.

Addresses: connections go only to the addresses the SSRF guard checked, tried in the
resolver's order until one connects (refused, unreachable, a failed TLS handshake, or no
answer within ``fallback_connect_timeout_s``, 3 s, moves on to the next; the last address has
what is left of the attempt's timeout). A kept-alive connection to any of them is used first.

Stale keep-alive connections: an idle connection whose endpoint has closed it (end of stream
seen) is dropped before use. A POST is sent a second time only when its connection was taken
from the idle pool and failed (closed, reset, broken pipe) before the client had read any
byte of an answer, as when the endpoint closes its idle side while the request goes out; it
is then sent once more, on a new connection. It is never re-sent after an answer byte was
read, after a new connection failed, or on a timeout. An endpoint that took the first copy
and closed without answering gets the event twice, with the same ``x-service-event-id``.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections import defaultdict
from collections.abc import Awaitable, Callable

from invoicing.notifications.guard import Target

# Answers longer than this are not read to the end; their connection is dropped instead.
MAX_ANSWER_BYTES = 64 * 1024
MAX_IDLE_PER_TARGET = 32

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Connect = Callable[[str, int, str | None], Awaitable[Streams]]
Key = tuple[str, int, str | None]  # (address, port, TLS name) of a connection


class ProtocolError(ConnectionError):
    """The endpoint's answer is not HTTP/1.x."""


class _Unanswered(Exception):
    """A connection from the idle pool failed before any byte of an answer was read."""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying context for every connection (loading the CA store costs ~60 ms)."""
    return ssl.create_default_context()


async def open_streams(address: str, port: int, tls_name: str | None) -> Streams:
    """Open a TCP (or TLS, verified against ``tls_name``) connection to ``address``."""
    if tls_name is None:
        return await asyncio.open_connection(address, port, limit=MAX_ANSWER_BYTES)
    return await asyncio.open_connection(
        address, port, ssl=_tls_context(), server_hostname=tls_name, limit=MAX_ANSWER_BYTES
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


async def _read_answer(reader: asyncio.StreamReader, head: bytes) -> tuple[int, bool]:
    """(status code, whether the connection can be reused) of the answer starting at ``head``."""
    while True:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(parts[1])
        if status >= 200 or status < 100:
            break
        head = await reader.readuntil(b"\r\n\r\n")  # 1xx: the real answer follows
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
    """Keep-alive connections by address; ``post`` never shares a connection at once."""

    def __init__(
        self, connect: Connect = open_streams, fallback_connect_timeout_s: float = 3.0
    ) -> None:
        self.connect = connect
        self.fallback_connect_timeout_s = fallback_connect_timeout_s
        self._idle: dict[Key, list[Streams]] = defaultdict(list)

    async def post(self, target: Target, headers: dict[str, str], body: bytes) -> int:
        """Send one POST and return the answer's status code."""
        request = _request_head(target, headers, len(body)) + body
        idle = self._take_idle(target)
        if idle is not None:
            try:
                return await self._exchange(*idle, request, reused=True)
            except _Unanswered:
                pass  # the endpoint closed the idle connection: once more on a new one
        key, streams = await self._open(target)
        return await self._exchange(key, streams, request, reused=False)

    async def _open(self, target: Target) -> tuple[Key, Streams]:
        """A new connection to the first checked address that accepts one, in order."""
        failures: list[tuple[str, OSError]] = []
        for address in target.addresses:
            last = address == target.addresses[-1]
            try:
                async with asyncio.timeout(None if last else self.fallback_connect_timeout_s):
                    streams = await self.connect(address, target.port, target.tls_name)
                return (address, target.port, target.tls_name), streams
            except OSError as exc:  # refused, unreachable, TLS failure, or too slow
                failures.append((address, exc))
        if len(failures) == 1:
            raise failures[0][1]
        reasons = "; ".join(f"{a}: {type(e).__name__}: {e}" for a, e in failures)
        raise ConnectionError(f"no address of {target.host} connects ({reasons})")

    async def _exchange(self, key: Key, streams: Streams, request: bytes, reused: bool) -> int:
        reader, writer = streams
        reusable = False
        try:
            try:
                writer.write(request)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                read = exc.partial if isinstance(exc, asyncio.IncompleteReadError) else b""
                if reused and not read:
                    raise _Unanswered from exc
                raise
            status, reusable = await _read_answer(reader, head)
            return status
        except asyncio.LimitOverrunError as exc:
            raise ProtocolError("answer headers are too long") from exc
        finally:
            if reusable and len(self._idle[key]) < MAX_IDLE_PER_TARGET:
                self._idle[key].append(streams)
            else:
                writer.close()

    def _take_idle(self, target: Target) -> tuple[Key, Streams] | None:
        """An open idle connection to one of the target's checked addresses, if any."""
        for address in target.addresses:
            key = (address, target.port, target.tls_name)
            idle = self._idle.get(key)
            while idle:
                reader, writer = idle.pop()
                if not reader.at_eof() and not writer.is_closing():
                    return key, (reader, writer)
                writer.close()
        return None

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()
        self._idle.clear()
