"""A fault-injecting JSON-RPC proxy in front of the test node (plain asyncio HTTP, so that it
can also drop a connection without answering).

``proxy.fault`` says what it does to every request from now on:

- ``None``: forward to the node;
- ``"drop"``: close the connection without an answer;
- ``"429"``: answer HTTP 429 with ``Retry-After: proxy.retry_after``;
- ``"503"``: answer HTTP 503 with an HTML page (a load balancer's error);
- ``"delay"``: wait ``delay_s`` before forwarding (past the client's timeout);
- ``"stale"``: a node stuck at block ``stale_block``: ``eth_blockNumber`` answers it, reads
  at ``latest``/``pending`` are made at it, reads at a later block get ``header not found``
  and receipts of later blocks are null;
- ``"lag"``: a node that keeps the chain's pace ``lag`` blocks behind: ``"stale"`` at the
  node's head less ``lag``, at every request;
- ``"lie"``: a provider that lies (or whose backends lag): requests are forwarded, then
  ``eth_blockNumber`` answers ``head_lead`` blocks more, ``eth_getTransactionCount``
  ``count_lead`` more, ``eth_chainId`` answers ``chain_id`` when set, with
  ``hide_receipts`` every receipt is null, with ``fail_receipts`` every receipt says the
  transaction failed (status 0), with ``late_receipts`` the receipts of the head block are
  null (a node that shows a new block's state before it serves its receipts, as anvil
  under load does), and with ``signature_ok`` every ``eth_call`` answers the EIP-1271
  magic value.

Whatever the fault, a request that asks one of ``proxy.hanging`` (method names) waits
``hang_s`` before it is answered: a node slow on one call, fast on the rest.

``proxy.methods`` counts the JSON-RPC methods it was asked (batch items one by one). It serves
any path, so a test can give it a URL that carries a made-up provider key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

_BLOCK_NUMBER = {"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}
# isValidSignature's selector, left-aligned in a 32-byte word: "this signature is valid".
MAGIC = bytes.fromhex("1626ba7e") + bytes(28)

# Where each method takes its block parameter.
BLOCK_PARAM = {
    "eth_getBalance": 1,
    "eth_getCode": 1,
    "eth_getTransactionCount": 1,
    "eth_call": 1,
    "eth_estimateGas": 1,
    "eth_getBlockByNumber": 0,
    "eth_getStorageAt": 2,
}


class FaultyRpc:
    """The proxy's controls and what it saw."""

    def __init__(self, node_url: str) -> None:
        self.node_url = node_url
        self.url = ""
        self.fault: str | None = None
        self.faults_left: int | None = None  # set: the fault ends after this many requests
        self.retry_after = "1"
        self.delay_s = 2.0
        self.stale_block = 0
        self.head_lead = 0
        self.count_lead = 0
        self.chain_id: int | None = None
        self.hide_receipts = False
        self.fail_receipts = False
        self.late_receipts = False
        self.signature_ok = False
        self.lag = 0
        self.hanging: set[str] = set()
        self.hang_s = 60.0
        self.methods: Counter[str] = Counter()
        self.requests = 0  # HTTP requests received
        self.faulted = 0  # of those, answered with a fault (stale: any request)
        self._http = httpx.AsyncClient(timeout=30)
        self._handlers: set[asyncio.Task[Any]] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                self.requests += 1
                fault = self.fault
                if fault is not None:
                    self.faulted += 1
                    if self.faults_left is not None:
                        self.faults_left -= 1
                        if self.faults_left <= 0:
                            self.fault = self.faults_left = None
                if fault == "drop":
                    writer.transport.abort()
                    return
                status, headers, body = await self._answer(fault, request)
                _write(writer, status, headers, body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(self, fault: str | None, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if fault == "429":
            return 429, {"Retry-After": self.retry_after}, b"rate limited"
        if fault == "503":
            return 503, {"Content-Type": "text/html"}, b"<html>503 Service Unavailable</html>"
        if fault == "delay":
            await asyncio.sleep(self.delay_s)
        sent = json.loads(body)
        items = sent if isinstance(sent, list) else [sent]
        self.methods.update(str(item.get("method")) for item in items)
        if self.hanging & {str(item.get("method")) for item in items}:
            await asyncio.sleep(self.hang_s)
        if fault == "lag":
            head = (await self._http.post(self.node_url, json=_BLOCK_NUMBER)).json()["result"]
            self.stale_block = max(0, int(head, 16) - self.lag)
        if fault in ("stale", "lag", "lie"):
            answers = [await (self._lie if fault == "lie" else self._stale)(item) for item in items]
            answer: Any = answers if isinstance(sent, list) else answers[0]
            return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()
        forwarded = await self._http.post(
            self.node_url, content=body, headers={"Content-Type": "application/json"}
        )
        return forwarded.status_code, {"Content-Type": "application/json"}, forwarded.content

    async def _stale(self, item: dict[str, Any]) -> dict[str, Any]:
        method, params = item.get("method"), list(item.get("params") or [])
        reply = {"jsonrpc": "2.0", "id": item.get("id")}
        if method == "eth_blockNumber":
            return reply | {"result": hex(self.stale_block)}
        if method in BLOCK_PARAM:
            index = BLOCK_PARAM[method]
            block = params[index] if len(params) > index else "latest"
            if block in ("latest", "pending", "safe", "finalized"):
                block = hex(self.stale_block)
            if int(block, 16) > self.stale_block:
                return reply | {"error": {"code": -32000, "message": "header not found"}}
            params = [*params, *([None] * (index + 1 - len(params)))]
            params[index] = block
        answer: dict[str, Any] = (
            await self._http.post(self.node_url, json=item | {"params": params})
        ).json()
        result = answer.get("result")
        if method == "eth_getTransactionReceipt" and isinstance(result, dict):
            if int(result["blockNumber"], 16) > self.stale_block:
                answer["result"] = None
        return answer

    async def _lie(self, item: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = (await self._http.post(self.node_url, json=item)).json()
        method, result = item.get("method"), answer.get("result")
        if method == "eth_blockNumber" and isinstance(result, str):
            answer["result"] = hex(int(result, 16) + self.head_lead)
        elif method == "eth_getTransactionCount" and isinstance(result, str):
            answer["result"] = hex(int(result, 16) + self.count_lead)
        elif method == "eth_chainId" and self.chain_id is not None:
            answer["result"] = hex(self.chain_id)
        elif method == "eth_getTransactionReceipt" and self.hide_receipts:
            answer["result"] = None
        elif method == "eth_getTransactionReceipt" and self.fail_receipts and result:
            answer["result"] = result | {"status": "0x0"}
        elif method == "eth_getTransactionReceipt" and self.late_receipts and result:
            head = (await self._http.post(self.node_url, json=_BLOCK_NUMBER)).json()["result"]
            if int(result["blockNumber"], 16) >= int(head, 16):
                answer["result"] = None
        elif method == "eth_call" and self.signature_ok:
            answer = {"jsonrpc": "2.0", "id": item.get("id"), "result": "0x" + MAGIC.hex()}
        return answer

    async def aclose(self) -> None:
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._http.aclose()


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return await reader.readexactly(length)


def _write(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes) -> None:
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


@asynccontextmanager
async def faulty_rpc(node_url: str) -> AsyncIterator[FaultyRpc]:
    """Serve a FaultyRpc to ``node_url`` on a free port (no fault to begin with)."""
    proxy = FaultyRpc(node_url)
    server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy.url = f"http://127.0.0.1:{port}/"
    try:
        yield proxy
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)
        await proxy.aclose()
