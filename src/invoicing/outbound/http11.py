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

Bounds (``PoolBounds``): receivers may keep every connection open and an owner may move its
endpoints to new addresses, so idle connections are closed ``idle_s`` after their last
answer (30 s; on a timer, also when nothing is sent), and the least recently used go first
past 256 in the pool, 64 left by one owner's deliveries or 32 to one address.
"""

from __future__ import annotations

import asyncio
import functools
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from invoicing.outbound.guard import Target

# Answers longer than this are not read to the end; their connection is dropped instead.
MAX_ANSWER_BYTES = 64 * 1024
# Bounds on what an answer's head may be (``parse_head``); past them the attempt fails.
MAX_STATUS_LINE_BYTES = 1024
MAX_HEAD_BYTES = 16 * 1024
MAX_HEADERS = 100
MAX_INTERIM_ANSWERS = 8
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


@dataclass(frozen=True)
class AnswerHead:
    """The status line and headers of one answer, as ``parse_head`` accepted them."""

    version: str  # "HTTP/1.0" or "HTTP/1.1"
    status: int  # three digits, 100 to 599
    headers: dict[str, str]  # lower-cased names and values; a repeated name keeps the last


def parse_head(head: bytes) -> AnswerHead:
    """The answer's head (up to and including the blank line), parsed strictly: anything
    else raises ``ProtocolError``. A stranger writes these bytes, so every bound is checked
    before a value is used: the status line (``MAX_STATUS_LINE_BYTES``), the whole head
    (``MAX_HEAD_BYTES``), the number of headers (``MAX_HEADERS``), the status code (three
    digits, 100 to 599) and the header names (RFC 9110 tokens; no folded lines)."""
    status_line, _, rest = head.partition(b"\r\n")
    if len(status_line) > MAX_STATUS_LINE_BYTES:
        raise ProtocolError(f"the status line is longer than {MAX_STATUS_LINE_BYTES} bytes")
    if len(head) > MAX_HEAD_BYTES:
        raise ProtocolError(f"the answer's headers are longer than {MAX_HEAD_BYTES} bytes")
    matched = _STATUS_LINE.fullmatch(status_line)
    if matched is None:
        if _LOOSE_STATUS.match(status_line):
            raise ProtocolError("the status code is not three digits")
        shown = status_line[:80].decode("latin-1")
        raise ProtocolError(f"not an HTTP/1.x status line: {shown!r}")
    status = int(matched[2])
    if not 100 <= status <= 599:
        raise ProtocolError(f"the status code {status} is not between 100 and 599")
    lines = rest.split(b"\r\n")
    if lines[-2:] != [b"", b""]:
        raise ProtocolError("the answer's headers do not end with a blank line")
    if len(lines) - 2 > MAX_HEADERS:
        raise ProtocolError(f"the answer has more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for line in lines[:-2]:
        field = _HEADER.fullmatch(line)
        if field is None:
            raise ProtocolError(f"not a header line: {line[:80].decode('latin-1')!r}")
        headers[field[1].decode().lower()] = field[2].strip(b" \t").decode("latin-1").lower()
    return AnswerHead(f"HTTP/1.{matched[1].decode()}", status, headers)


_STATUS_LINE = re.compile(rb"HTTP/1\.([0-9]) ([0-9]{3})(?: [\t\x20-\x7e\x80-\xff]*)?")
_LOOSE_STATUS = re.compile(rb"HTTP/1\.[0-9] +[0-9]")
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):([\t\x20-\x7e\x80-\xff]*)")


def body_length(headers: dict[str, str]) -> int | None:
    """The Content-Length header's value; None when absent; ``ProtocolError`` when it is not
    a plain decimal number of at most 18 digits."""
    length = headers.get("content-length")
    if length is None:
        return None
    if not (length.isascii() and length.isdigit() and len(length) <= 18):
        raise ProtocolError(f"not a content length: {length[:40]!r}")
    return int(length)


async def _read_answer(reader: asyncio.StreamReader, head: bytes) -> tuple[int, bool]:
    """(status code, whether the connection can be reused) of the answer starting at ``head``."""
    answer = parse_head(head)
    interim = 0
    while answer.status < 200:  # 1xx: the real answer follows
        interim += 1
        if interim > MAX_INTERIM_ANSWERS:
            raise ProtocolError(f"more than {MAX_INTERIM_ANSWERS} interim (1xx) answers")
        answer = parse_head(await _read_head(reader))
    status, headers = answer.status, answer.headers
    reusable = headers.get("connection") != "close" and answer.version == "HTTP/1.1"
    if "chunked" in headers.get("transfer-encoding", ""):
        return status, reusable and await _skip_chunks(reader)
    length = body_length(headers)
    if length is None:
        return status, status in (204, 304)
    if length > MAX_ANSWER_BYTES:
        return status, False
    await reader.readexactly(length)
    return status, reusable


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    """The next head on the connection, up to its blank line (``ProtocolError`` past
    ``MAX_HEAD_BYTES``)."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as exc:
        raise ProtocolError(f"the answer's headers are longer than {MAX_HEAD_BYTES} bytes") from exc


async def _skip_chunks(reader: asyncio.StreamReader) -> bool:
    """Read a chunked body to its end; False when it is too long to bother."""
    total = 0
    while True:
        line = (await reader.readuntil(b"\r\n")).split(b";")[0].strip()
        if not _CHUNK_SIZE.fullmatch(line):
            raise ProtocolError(f"not a chunk size: {line[:40].decode('latin-1')!r}")
        size = int(line, 16)
        total += size
        if total > MAX_ANSWER_BYTES:
            return False
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return True
        await reader.readexactly(size + 2)


_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,8}")


@dataclass(frozen=True)
class PoolBounds:
    """What the pool keeps of the connections receivers leave open (keep-alive), so that
    receivers that never close theirs cannot use up the process's file descriptors: an idle
    connection is closed ``idle_s`` after its last answer, and past ``max_idle`` in the pool,
    ``max_idle_per_owner`` left by one owner's deliveries or ``max_idle_per_target`` to one
    address, the least recently used ones of that bound are closed first."""

    idle_s: float = 30.0
    max_idle: int = 256
    max_idle_per_owner: int = 64
    max_idle_per_target: int = MAX_IDLE_PER_TARGET


DEFAULT_BOUNDS = PoolBounds()


@dataclass(eq=False)
class _Idle:
    """A kept-alive connection, idle in the pool since ``since`` (the pool's clock)."""

    key: Key
    owner: str
    streams: Streams
    since: float

    @property
    def usable(self) -> bool:
        """Whether the endpoint has not closed it meanwhile (end of stream)."""
        reader, writer = self.streams
        return not reader.at_eof() and not writer.is_closing()


class ConnectionPool:
    """Keep-alive connections by address, within ``PoolBounds``; ``post`` never shares a
    connection at once."""

    def __init__(
        self,
        connect: Connect = open_streams,
        fallback_connect_timeout_s: float = 3.0,
        bounds: PoolBounds = DEFAULT_BOUNDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connect = connect
        self.fallback_connect_timeout_s = fallback_connect_timeout_s
        self.bounds = bounds
        self.clock = clock
        self._idle: dict[Key, list[_Idle]] = {}  # by address, the most recently used last
        self._by_age: dict[_Idle, None] = {}  # all of them, the least recently used first
        self._by_owner: dict[str, dict[_Idle, None]] = {}  # by the owner who left it
        self._reaper: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def idle(self) -> int:
        """How many idle connections the pool holds open."""
        return len(self._by_age)

    async def post(
        self, target: Target, headers: dict[str, str], body: bytes, owner: str = ""
    ) -> int:
        """Send one POST and return the answer's status code; the connection is kept for
        reuse, counted against ``owner`` (whose delivery it is)."""
        request = _request_head(target, headers, len(body)) + body
        idle = self._take_idle(target)
        if idle is not None:
            try:
                return await self._exchange(idle.key, idle.streams, request, owner, reused=True)
            except _Unanswered:
                pass  # the endpoint closed the idle connection: once more on a new one
        key, streams = await self._open(target)
        return await self._exchange(key, streams, request, owner, reused=False)

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

    async def _exchange(
        self, key: Key, streams: Streams, request: bytes, owner: str, reused: bool
    ) -> int:
        reader, writer = streams
        reusable = False
        try:
            try:
                writer.write(request)
                await writer.drain()
                head = await _read_head(reader)
            except ProtocolError:
                raise  # an answer came: never sent again
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                read = exc.partial if isinstance(exc, asyncio.IncompleteReadError) else b""
                if reused and not read:
                    raise _Unanswered from exc
                raise
            status, reusable = await _read_answer(reader, head)
            return status
        except asyncio.LimitOverrunError as exc:
            raise ProtocolError("an answer line is too long") from exc
        finally:
            if reusable and not self._closed:
                self._keep(_Idle(key, owner, streams, self.clock()))
            else:
                writer.close()

    def _keep(self, entry: _Idle) -> None:
        """Keep ``entry`` for reuse; past a bound, close that bound's least recently used."""
        bounds = self.bounds
        at_key = self._idle.setdefault(entry.key, [])
        at_key.append(entry)
        owned = self._by_owner.setdefault(entry.owner, {})
        owned[entry] = None
        self._by_age[entry] = None
        while len(at_key) > bounds.max_idle_per_target:
            self._close(at_key[0])
        while len(owned) > bounds.max_idle_per_owner:
            self._close(next(iter(owned)))
        while len(self._by_age) > bounds.max_idle:
            self._close(next(iter(self._by_age)))
        self._schedule_reap()

    def _take_idle(self, target: Target) -> _Idle | None:
        """An open idle connection to one of the target's checked addresses, if any."""
        self._reap()
        for address in target.addresses:
            at_key = self._idle.get((address, target.port, target.tls_name), [])
            while at_key:
                entry = at_key[-1]
                self._forget(entry)
                if entry.usable:
                    return entry
                entry.streams[1].close()
        return None

    def _forget(self, entry: _Idle) -> None:
        """Take ``entry`` out of the pool (it stays open)."""
        at_key = self._idle[entry.key]
        at_key.remove(entry)
        if not at_key:
            del self._idle[entry.key]
        owned = self._by_owner[entry.owner]
        del owned[entry]
        if not owned:
            del self._by_owner[entry.owner]
        del self._by_age[entry]

    def _close(self, entry: _Idle) -> None:
        self._forget(entry)
        entry.streams[1].close()

    def _reap(self) -> None:
        """Close the connections idle for ``idle_s`` or longer."""
        deadline = self.clock() - self.bounds.idle_s
        while self._by_age:
            oldest = next(iter(self._by_age))
            if oldest.since > deadline:
                break
            self._close(oldest)

    def _schedule_reap(self) -> None:
        """Reap when the oldest idle connection's time is up, even if nothing is sent then."""
        if self._reaper is not None or not self._by_age:
            return
        oldest = next(iter(self._by_age))
        delay = max(oldest.since + self.bounds.idle_s - self.clock(), 0.0)
        self._reaper = asyncio.get_running_loop().call_later(delay, self._on_reaper)

    def _on_reaper(self) -> None:
        self._reaper = None
        self._reap()
        self._schedule_reap()

    async def aclose(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        while self._by_age:
            self._close(next(iter(self._by_age)))
