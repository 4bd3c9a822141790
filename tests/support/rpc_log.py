"""A JSON-RPC proxy in front of the test node that records every call passed through it and
can rewrite the node's answers (a lying node, for the start-up checks)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.server import serve


class RpcLog:
    """The calls seen so far, as (method, params), in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def calls_to(self, address: str) -> list[tuple[str, list[Any]]]:
        """Calls whose parameters hold ``address`` anywhere (as ``to``, or in calldata)."""
        wanted = address.lower().removeprefix("0x")
        return [call for call in self.calls if wanted in str(call[1]).lower()]


# (request, the node's answer) -> the answer to send instead
Rewrite = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@asynccontextmanager
async def recording_proxy(
    node_url: str, rewrite: Rewrite | None = None
) -> AsyncIterator[tuple[str, RpcLog]]:
    """Serve a proxy to ``node_url``; yields its URL and the log of calls through it.
    ``rewrite`` may change the answer to each request, batched ones included."""
    log = RpcLog()
    async with httpx.AsyncClient(timeout=30) as client:

        async def forward(request: Request) -> Response:
            body = await request.body()
            sent = json.loads(body)
            for item in sent if isinstance(sent, list) else [sent]:
                log.calls.append((item.get("method"), item.get("params", [])))
            answer = await client.post(
                node_url, content=body, headers={"content-type": "application/json"}
            )
            content = answer.content
            if rewrite is not None and isinstance(sent, dict):
                content = json.dumps(rewrite(sent, answer.json())).encode()
            elif rewrite is not None and isinstance(sent, list):
                by_id = {item.get("id"): item for item in sent}
                content = json.dumps(
                    [rewrite(by_id[item.get("id")], item) for item in answer.json()]
                ).encode()
            return Response(content, answer.status_code, media_type="application/json")

        app = Starlette(routes=[Route("/", forward, methods=["POST"])])
        async with serve(app) as url:  # type: ignore[arg-type]
            yield url + "/", log
