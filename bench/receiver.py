"""A minimal, fast HTTP/1.1 webhook receiver for the benchmarks (keep-alive, no framework).

Paths under ``/fail`` answer 500, everything else 204. ``GET /stats`` answers the counts as
JSON. Importable (``start_receiver``) or run as a process, listening on one or more loopback
addresses (each one a webhook host of its own); as a process it exits when its stdin closes,
so it never outlives the benchmark that started it::

    .venv/bin/python bench/receiver.py --port 9000 [--hosts 127.0.0.2,127.0.0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Stats:
    received: int = 0
    failed: int = 0
    # (path, x-service-event-id, monotonic arrival time) of every POST
    arrivals: list[tuple[str, str, float]] = field(default_factory=list)
    keep_arrivals: bool = True


def _answer(status: int, body: bytes = b"") -> bytes:
    reason = {200: "OK", 204: "No Content", 500: "Internal Server Error"}.get(status, "X")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    return head.encode() + b"\r\n" + body


async def _serve_connection(
    stats: Stats, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if length:
                await reader.readexactly(length)
            if method == "GET" and path == "/stats":
                body = json.dumps({"received": stats.received, "failed": stats.failed}).encode()
                writer.write(_answer(200, body))
            else:
                stats.received += 1
                if stats.keep_arrivals:
                    event_id = headers.get("x-service-event-id", "")
                    stats.arrivals.append((path, event_id, time.monotonic()))
                failing = path.startswith("/fail")
                stats.failed += failing
                writer.write(_answer(500 if failing else 204))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def start_receiver(
    port: int = 0, keep_arrivals: bool = True, hosts: Sequence[str] = ("127.0.0.1",)
) -> tuple[asyncio.Server, Stats]:
    stats = Stats(keep_arrivals=keep_arrivals)
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(stats, r, w), list(hosts), port, backlog=1024
    )
    return server, stats


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hosts", default="127.0.0.1", help="comma-separated addresses")
    args = parser.parse_args()
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()

    async def run() -> None:
        hosts = args.hosts.split(",")
        server, _ = await start_receiver(args.port, keep_arrivals=False, hosts=hosts)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


if __name__ == "__main__":
    main()
