"""A bare FastAPI app for ``bench/api.py``: what the framework alone costs per request.

``GET /healthz`` is the same trivial route as the service's; ``POST /echo`` parses a JSON body
and answers 201 with a JSON body of the size of a created invoice (``BENCH_RESPONSE_BYTES``),
doing nothing else. Its ratio to ``/healthz`` is the ceiling for any create ratio: the cost
of a POST with a body and a larger answer, before any of the service's own work.
"""

from __future__ import annotations

import json
import os

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI()
ANSWER = {"padding": "x" * max(0, int(os.environ.get("BENCH_RESPONSE_BYTES", "900")) - 15)}


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/echo", status_code=201)
async def echo(request: Request) -> JSONResponse:
    json.loads(await request.body())
    return JSONResponse(ANSWER, status_code=201)
