"""A small async JSON-RPC client for EVM nodes.

Transport failures become :class:`ChainUnavailable`; a JSON-RPC error object becomes
:class:`RpcError`, and a contract revert during ``eth_call``/``eth_estimateGas`` becomes
:class:`ContractRevert` carrying the revert data.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from invoicing.errors import ChainUnavailable


class RpcError(Exception):
    """The node answered with a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"rpc error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class ContractRevert(RpcError):
    """A call or gas estimate reverted; ``revert_data`` holds the raw revert bytes."""

    def __init__(self, code: int, message: str, revert_data: bytes) -> None:
        super().__init__(code, message, "0x" + revert_data.hex())
        self.revert_data = revert_data


def _revert_data(error: dict[str, Any]) -> bytes | None:
    message = str(error.get("message", ""))
    data = error.get("data")
    if isinstance(data, dict):
        data = data.get("data")
    if isinstance(data, str) and data.startswith("0x"):
        return bytes.fromhex(data[2:])
    if "revert" in message.lower():
        return b""
    return None


def _raise_for_error(error: dict[str, Any]) -> None:
    code = int(error.get("code", -32000))
    message = str(error.get("message", ""))
    revert = _revert_data(error)
    if revert is not None:
        raise ContractRevert(code, message, revert)
    raise RpcError(code, message, error.get("data"))


class JsonRpc:
    """JSON-RPC over HTTP with a call counter (benchmarks report RPC calls per pass)."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url
        self.calls = 0
        self._ids = itertools.count(1)
        self._http = httpx.AsyncClient(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, body: Any) -> Any:
        self.calls += 1
        try:
            response = await self._http.post(self.url, json=body)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ChainUnavailable(f"RPC {self.url} unreachable: {exc}") from exc

    async def call(self, method: str, params: list[Any] | None = None) -> Any:
        """Send one request and return its ``result``."""
        answer = await self._post(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or []}
        )
        if not isinstance(answer, dict):
            raise ChainUnavailable(f"RPC {self.url} sent a malformed answer")
        if "error" in answer:
            _raise_for_error(answer["error"])
        return answer.get("result")

    async def batch(self, requests: list[tuple[str, list[Any]]]) -> list[Any]:
        """Send several requests in one HTTP round trip; results come back in order."""
        if not requests:
            return []
        first = next(self._ids)
        for _ in requests[1:]:
            next(self._ids)
        body = [
            {"jsonrpc": "2.0", "id": first + i, "method": method, "params": params}
            for i, (method, params) in enumerate(requests)
        ]
        answers = await self._post(body)
        if not isinstance(answers, list):
            raise ChainUnavailable(f"RPC {self.url} sent a malformed batch answer")
        by_id = {a.get("id"): a for a in answers if isinstance(a, dict)}
        results = []
        for i in range(len(requests)):
            answer = by_id.get(first + i)
            if answer is None:
                raise ChainUnavailable(f"RPC {self.url} dropped a batch item")
            if "error" in answer:
                _raise_for_error(answer["error"])
            results.append(answer.get("result"))
        return results
