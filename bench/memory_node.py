"""A minimal JSON-RPC node in the bench's own process, answering from memory.

It knows what the monitor's passes ask: ``eth_chainId``, ``eth_blockNumber``,
``eth_getBlockByNumber`` (a timestamp), ``eth_getBalance``, ``eth_getCode`` (of the
EscrowReader), ``eth_call`` of the factory's ``balancesOf(token, accounts)``, of the
EscrowReader's ``read(tokens, counts, accounts)`` and of a token's ``balanceOf``, answered
from dicts without executing anything. A bench run against it measures the service's own
time: anvil's EVM work per balance is not in it.

    async with MemoryNode(chain_id, factory) as node:
        node.native[address] = 10**18
        ... EvmClient.connect(node.url) ...
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from invoicing.chain.artifacts import ESCROW_READER, load_artifact
from invoicing.chain.calldata import encode_balances_of
from invoicing.chain.reader import encode_read, reader_address

SELECTOR = encode_balances_of("0x" + "00" * 20, [])[:4]
READ_SELECTOR = encode_read([])[:4]
READER = reader_address().lower()
READER_CODE = "0x" + load_artifact(ESCROW_READER).deployed_bytecode.hex()
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

    def __init__(self, chain_id: int, factory: str, block: int = 100) -> None:
        self.chain_id = chain_id
        self.factory = factory.lower()
        self.block = block
        self.native: dict[str, int] = {}
        self.tokens: dict[str, dict[str, int]] = {}
        self.calls = 0
        self.cpu_s = 0.0  # spent answering (the handler; not its HTTP server's)
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
            answer["result"] = READER_CODE if params[0].lower() == READER else "0x"
        elif method == "eth_call" and params[0].get("to", "").lower() == READER:
            answer["result"] = "0x" + self._read(params[0]["data"])
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
        """read(tokens, counts, accounts) → (block, parent hash, uint256[]) in hex, from the
        layout ``chain.reader.encode_read`` writes (``data``: its hex, read as text)."""
        if bytes.fromhex(data[2:10]) != READ_SELECTOR:
            raise ValueError("only read is served")

        def word(at: int) -> int:  # at: a byte offset after the selector
            return int(data[10 + 2 * at : 10 + 2 * at + 64], 16)

        tokens_at, counts_at, accounts_at = word(0), word(32), word(64)
        groups = word(tokens_at)
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
