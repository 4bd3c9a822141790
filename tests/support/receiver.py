"""A real HTTP receiver for webhook tests: records every request, answers from a script."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response

from tests.support.server import serve


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    raw: bytes = b""  # the body exactly as it arrived


@dataclass
class Receiver:
    """``answers[path]`` lists status codes to give in turn (then ``default``);
    ``delay_s[path]`` makes that endpoint slow; ``peak_in_flight[path]`` is the most
    requests to that path it ever had open at once."""

    base_url: str = ""
    requests: list[Received] = field(default_factory=list)
    answers: dict[str, list[int]] = field(default_factory=dict)
    delay_s: dict[str, float] = field(default_factory=dict)
    default: int = 200
    in_flight: Counter[str] = field(default_factory=Counter)
    peak_in_flight: Counter[str] = field(default_factory=Counter)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == "/" + path.lstrip("/")]

    async def wait_for(self, path: str, count: int = 1, timeout_s: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(self.at(path)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: got {len(self.at(path))} of {count} requests")
            await asyncio.sleep(0.02)
        return self.at(path)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/{path:path}")
        async def hook(path: str, request: Request) -> Response:
            key = "/" + path
            raw = await request.body()
            self.requests.append(
                Received(key, dict(request.headers), json.loads(raw), time.time(), raw)
            )
            self.arrived.set()
            self.in_flight[key] += 1
            self.peak_in_flight[key] = max(self.peak_in_flight[key], self.in_flight[key])
            try:
                if key in self.delay_s:
                    await asyncio.sleep(self.delay_s[key])
            finally:
                self.in_flight[key] -= 1
            script = self.answers.get(key)
            return Response(status_code=script.pop(0) if script else self.default)

        return app


@asynccontextmanager
async def receiver(keep_alive_s: float = 5) -> AsyncIterator[Receiver]:
    recv = Receiver()
    async with serve(recv.app(), keep_alive_s=keep_alive_s) as base_url:
        recv.base_url = base_url
        yield recv
