"""A minimal JSON-RPC node answering from memory, in the bench's process or in its own.

It knows what the monitor's passes ask: ``eth_chainId``, ``eth_blockNumber``,
``eth_getBlockByNumber`` (a timestamp), ``eth_getBalance``, ``eth_getCode`` (of the
EscrowReader, both versions), ``eth_call`` of the factory's ``balancesOf(token, accounts)``,
of the EscrowReader's ``read(tokens, counts, accounts)`` (version 2: packed accounts, only
the values that are not zero answered; version 1: a word per account and per value) and of a
token's ``balanceOf``, answered from dicts without executing anything. A bench run against it
measures the service's own time: anvil's EVM work per balance is not in it.

    async with MemoryNode(chain_id, factory) as node:       # in this process
        node.native[address] = 10**18
        ... EvmClient.connect(node.url) ...

    async with MemoryNodeProcess(chain_id, factory) as node:  # in a process of its own
        await node.fund(None, address, 10**18)
        ... node.cpu_s (the node process's CPU time: its HTTP server's and its handler's) ...

In its own process the node's HTTP and JSON work is not counted as the service's: that is
how ``bench/monitor.py`` measures by default. The node tells which reader versions the
package it runs on ships (``EscrowReader``, and ``EscrowReaderV1`` where it exists) by their
artifacts, and tells the versions' calls apart by selector, so the same node serves the code
before and after a reader change.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
import time
from multiprocessing.connection import Connection
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from invoicing.chain.artifacts import load_artifact
from invoicing.chain.calldata import encode_balances_of
from invoicing.chain.deploy import deterministic_address
from invoicing.hashing import keccak256

SELECTOR = encode_balances_of("0x" + "00" * 20, [])[:4]
READ_V1_SELECTOR = keccak256(b"read(address[],uint256[],address[])")[:4].hex()
READ_V2_SELECTOR = keccak256(b"read(address[],uint256[],bytes)")[:4].hex()


READERS = ("EscrowReader", "EscrowReaderV1")


def reader_codes(names: tuple[str, ...] = READERS) -> dict[str, str]:
    """The runtime code of each reader version of ``names`` the package ships, by address."""
    codes = {}
    for name in names:
        try:
            artifact = load_artifact(name)
        except FileNotFoundError:  # a package from before version 2
            continue
        codes[deterministic_address(artifact.bytecode).lower()] = (
            "0x" + artifact.deployed_bytecode.hex()
        )
    return codes


ZERO_WORD = bytes(32)
_ZERO_HEX = "0" * 64
BALANCE_OF = "0x70a08231"  # ERC-20 balanceOf(address)


def balances(data: str, start: int, count: int, book: dict[str, int]) -> str:
    """The hex of one balance word per account word of ``data[start:]`` (calldata in hex,
    ``count`` words): each funded address of ``book`` is looked for in the text, not each
    escrow in the book, so the node's time stays out of the service's measure (a step per
    escrow in Python cost as much as the service's pass)."""
    end = start + 64 * count
    found: list[tuple[int, int]] = []
    for address, balance in book.items():
        needle = address.removeprefix("0x").lower()
        at = data.find(needle, start, end) if balance else -1
        while at >= 0:
            if (at - start) % 64 == 24:
                found.append(((at - start) // 64, balance))
            at = data.find(needle, at + 1, end)
    pieces, done = [], 0
    for index, balance in sorted(found):
        pieces += [_ZERO_HEX * (index - done), f"{balance:064x}"]
        done = index + 1
    pieces.append(_ZERO_HEX * (count - done))
    return "".join(pieces)


def found_packed(data: str, start: int, count: int, book: dict[str, int], first: int) -> str:
    """The hex of version 2's pairs (index, value) for the ``count`` packed accounts of
    ``data[start:]`` (calldata in hex; the first is account ``first`` of the call): each
    funded address of ``book`` is looked for in the text, as ``balances`` does."""
    end = start + 40 * count
    found: list[tuple[int, int]] = []
    for address, balance in book.items():
        needle = address.removeprefix("0x").lower()
        at = data.find(needle, start, end) if balance else -1
        while at >= 0:
            if (at - start) % 40 == 0:
                found.append((first + (at - start) // 40, balance))
            at = data.find(needle, at + 1, end)
    return "".join(f"{index:064x}{balance:064x}" for index, balance in sorted(found))


def _without_data(raw: bytes) -> tuple[str | None, Any]:
    """The request, and its ``eth_call`` calldata cut out of it first (the decoder's scan of
    the calldata's hex would be the node's time in the service's measure)."""
    at = raw.find(b'"data":"0x')
    end = raw.find(b'"', at + 8) if at >= 0 else -1
    if end < 0 or end - at < 4096:
        return None, json.loads(raw)
    data = raw[at + 8 : end].decode()
    return data, json.loads(raw[:at] + b'"data":""' + raw[end + 1 :])


class MemoryNode:
    """Balances by lower-case address: ``native``, and ``tokens[token]`` per token."""

    def __init__(
        self, chain_id: int, factory: str, block: int = 100, readers: tuple[str, ...] = READERS
    ) -> None:
        self.chain_id = chain_id
        self.factory = factory.lower()
        self.block = block
        self.native: dict[str, int] = {}
        self.tokens: dict[str, dict[str, int]] = {}
        self.calls = 0
        self.cpu_s = 0.0  # spent answering (the handler; not its HTTP server's)
        self.reader_codes = reader_codes(readers)  # the reader versions this chain holds
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MemoryNode:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        app = Starlette(routes=[Route("/", self._endpoint, methods=["POST"])])
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        for _ in range(500):  # uvicorn says it has started only through this flag
            if self._server.started:
                break
            await asyncio.sleep(0.01)  # noqa: ASYNC110
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None and self._task is not None
        self._server.should_exit = True
        await self._task

    async def fund(self, token: str | None, address: str, value: int) -> None:
        """Give ``address`` a balance of ``value`` in ``token`` (None: native coin)."""
        book = self.native if token is None else self.tokens.setdefault(token.lower(), {})
        book[address.lower()] = value

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        started = time.process_time()
        try:
            return self._respond(raw)
        finally:
            self.cpu_s += time.process_time() - started

    def _respond(self, raw: bytes) -> Response:
        data, body = _without_data(raw)
        if isinstance(body, list):
            return JSONResponse([self._answer(item) for item in body])
        if data is not None:
            body["params"][0]["data"] = data
        answer = self._answer(body)
        if isinstance(answer.get("result"), str):
            # Written by hand: JSONResponse's encoder scans the ~0.5 MB of hex of a read.
            head = json.dumps({"jsonrpc": "2.0", "id": answer["id"]})[:-1]
            content = f'{head},"result":"{answer["result"]}"}}'
            return Response(content, media_type="application/json")
        return JSONResponse(answer)

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        method, params = request["method"], request.get("params") or []
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request.get("id")}
        if method == "eth_chainId":
            answer["result"] = hex(self.chain_id)
        elif method == "eth_blockNumber":
            answer["result"] = hex(self.block)
        elif method == "eth_getBlockByNumber":
            answer["result"] = {"number": hex(self.block), "timestamp": hex(int(time.time()))}
        elif method == "eth_getBalance":
            answer["result"] = hex(self.native.get(params[0].lower(), 0))
        elif method == "eth_getCode":
            answer["result"] = self.reader_codes.get(params[0].lower(), "0x")
        elif method == "eth_call" and params[0].get("to", "").lower() in self.reader_codes:
            answer["result"] = "0x" + self._read(params[0]["data"])
        elif method == "bench_setBalance":  # [token or None, address, value]: funds an escrow
            token, address, value = params
            book = self.native if token is None else self.tokens.setdefault(token.lower(), {})
            book[address.lower()] = int(value)
            answer["result"] = True
        elif method == "bench_cpu":
            answer["result"] = time.process_time()
        elif method == "eth_call" and params[0].get("to", "").lower() == self.factory:
            answer["result"] = "0x" + self._balances_of(bytes.fromhex(params[0]["data"][2:])).hex()
        elif method == "eth_call" and params[0].get("data", "").startswith(BALANCE_OF):
            book = self.tokens.get(params[0]["to"].lower(), {})
            balance = book.get("0x" + params[0]["data"][-40:].lower(), 0)
            answer["result"] = "0x" + balance.to_bytes(32, "big").hex()
        else:
            answer["error"] = {"code": -32601, "message": f"{method} is not served here"}
        return answer

    def _read(self, data: str) -> str:
        """read(tokens, counts, accounts) in hex, from the layouts ``chain.reader_codec``
        writes (``data``: its hex, read as text): version 2's (block, parent hash, count,
        pairs) or version 1's (block, parent hash, uint256[])."""
        selector = data[2:10].lower()
        if selector not in (READ_V1_SELECTOR, READ_V2_SELECTOR):
            raise ValueError("only read is served")

        def word(at: int) -> int:  # at: a byte offset after the selector
            return int(data[10 + 2 * at : 10 + 2 * at + 64], 16)

        tokens_at, counts_at, accounts_at = word(0), word(32), word(64)
        groups = word(tokens_at)
        if selector == READ_V2_SELECTOR:
            total = word(accounts_at) // 20
            pairs, index = [], 0
            for k in range(groups):
                token = f"0x{word(tokens_at + 32 * (k + 1)):040x}"
                book = self.native if int(token, 16) == 0 else self.tokens.get(token, {})
                count = min(word(counts_at + 32 * (k + 1)), total - index)
                start = 10 + 2 * (accounts_at + 32) + 40 * index
                pairs.append(found_packed(data, start, count, book, index))
                index += count
            found = "".join(pairs)
            head = [f"{self.block:064x}", _ZERO_HEX, f"{index:064x}", f"{128:064x}"]
            return "".join([*head, f"{len(found) // 64:064x}", found])
        words = [f"{self.block:064x}", _ZERO_HEX, f"{96:064x}", f"{word(accounts_at):064x}"]
        index = 0
        for k in range(groups):
            token = f"0x{word(tokens_at + 32 * (k + 1)):040x}"
            book = self.native if int(token, 16) == 0 else self.tokens.get(token, {})
            count = word(counts_at + 32 * (k + 1))
            start = 10 + 2 * (accounts_at + 32 * (index + 1))
            words.append(balances(data, start, count, book))
            index += count
        return "".join(words)

    def _balances_of(self, data: bytes) -> bytes:
        """balancesOf(token, accounts) → uint256[] (the calldata's layout is fixed: selector,
        token word, offset, length, one word per account)."""
        if data[:4] != SELECTOR:
            raise ValueError("only balancesOf is served")
        token = "0x" + data[16:36].hex()
        book = self.native if int(token, 16) == 0 else self.tokens.get(token, {})
        count = int.from_bytes(data[68:100], "big")
        words = [(32).to_bytes(32, "big"), count.to_bytes(32, "big")]
        for i in range(count):
            start = 100 + 32 * i + 12
            balance = book.get("0x" + data[start : start + 20].hex()) if book else None
            words.append(ZERO_WORD if not balance else balance.to_bytes(32, "big"))
        return b"".join(words)


def _serve(
    chain_id: int, factory: str, block: int, readers: tuple[str, ...], pipe: Connection
) -> None:
    """A process of its own: serve a MemoryNode until the parent says stop."""

    async def serve() -> None:
        async with MemoryNode(chain_id, factory, block, readers) as node:
            pipe.send(node.url)
            await asyncio.to_thread(pipe.recv)  # the parent's stop

    asyncio.run(serve())


class MemoryNodeProcess:
    """A MemoryNode in a process of its own (``spawn``): its HTTP server and handler do not
    run in the caller's process, and ``cpu_s`` is all of that process's CPU time."""

    def __init__(
        self, chain_id: int, factory: str, block: int = 100, readers: tuple[str, ...] = READERS
    ) -> None:
        self.args = (chain_id, factory, block, readers)
        self.url = ""
        self._pipe: Connection | None = None
        self._process: Any = None

    async def __aenter__(self) -> MemoryNodeProcess:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(*self.args, child), daemon=True)
        self._process.start()
        self.url = await asyncio.to_thread(self._pipe.recv)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._pipe is not None
        self._pipe.send("stop")
        await asyncio.to_thread(self._process.join, 10)

    @property
    def cpu_s(self) -> float:
        """The node process's CPU time so far (user and system, from /proc)."""
        with open(f"/proc/{self._process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def fund(self, token: str | None, address: str, value: int) -> None:
        """Give ``address`` a balance of ``value`` in ``token`` (None: native coin)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "bench_setBalance"}
        body["params"] = [token, address, value]  # type: ignore[assignment]
        _, port = self.url.rsplit(":", 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
        content = json.dumps(body).encode()
        writer.write(
            b"POST / HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(content)}\r\nConnection: close\r\n\r\n".encode()
            + content
        )
        await writer.drain()
        answer = await reader.read()
        writer.close()
        if b'"result":true' not in answer:
            raise RuntimeError(f"the memory node refused bench_setBalance: {answer[-200:]!r}")
