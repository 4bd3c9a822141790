"""A real local HTTP/1.1 endpoint for the webhook client's unit tests, and a client whose
resolver and connect step lead "public" addresses to it (the client's own injectable steps:
nothing of ours is mocked, and no test reaches beyond this machine)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field

from invoicing.notifications.client import HttpWebhookClient
from invoicing.outbound.http11 import ConnectionPool, Streams

Connects = list[tuple[str, int, str | None]]


@dataclass
class LocalServer:
    """Answers every request with ``answer`` (raw bytes after reading the request).

    After ``answers_per_connection`` answers on one connection it stops answering there:
    with ``then`` None it closes the connection at once (an idle timeout the client sees as
    end of stream); otherwise it reads the next request, writes ``then`` and closes.
    """

    answer: bytes = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    delay_s: float = 0.0
    answers_per_connection: int | None = None
    then: bytes | None = None
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    open: int = 0  # connections the server holds open now (it never closes an idle one)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        answered = 0
        try:
            while answered != self.answers_per_connection or self.then is not None:
                self.requests.append(await self._read_request(reader))
                if answered == self.answers_per_connection:
                    writer.write(self.then or b"")  # instead of an answer, then close
                    break
                await asyncio.sleep(self.delay_s)
                writer.write(self.answer)
                await writer.drain()
                answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.open -= 1

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return head + await reader.readexactly(length)


def make_client(
    server: LocalServer,
    *addresses: str,
    connects: Connects | None = None,
    refused: Collection[str] = (),
    silent: Collection[str] = (),
    fallback_connect_timeout_s: float = 3.0,
    **kwargs: object,
) -> HttpWebhookClient:
    """A client whose resolver answers ``addresses`` and whose connect step records where it
    was asked to connect, then reaches the local server; ``refused`` addresses refuse the
    connection and ``silent`` ones never answer."""

    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    async def connect(address: str, port: int, tls_name: str | None) -> Streams:
        if connects is not None:
            connects.append((address, port, tls_name))
        if address in refused:
            raise ConnectionRefusedError(111, "Connection refused")
        if address in silent:
            await asyncio.sleep(3600)
        return await asyncio.open_connection("127.0.0.1", server.port)

    wire = ConnectionPool(connect, fallback_connect_timeout_s)
    return HttpWebhookClient(resolver=resolve, wire=wire, **kwargs)  # type: ignore[arg-type]
