"""Request ids, request metrics and the last-resort 500, around every HTTP request.

Every response carries ``x-request-id``: the request's own when it sent a sane one (1 to
128 characters of ``A-Z a-z 0-9 . _ : -``), else a new random one. The id is bound to the
log context for the whole request (``invoicing.logs``). Requests are counted by route
template (``/pay/{payment_address}``, never the raw path; no route matched:
``metrics.UNMATCHED_ROUTE``), method (an unusual one: ``other``) and status, so that no
client can make the label sets grow without bound.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from invoicing import logs, metrics
from invoicing.web.errors import internal_error_response

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_HEADER_BYTES = REQUEST_ID_HEADER.encode()


def request_id_of(scope: Scope) -> str:
    """The request's ``x-request-id`` when sane, else a new one (32 hex digits)."""
    for name, value in scope.get("headers", ()):
        if name == _HEADER_BYTES:
            sent: str = value.decode("latin-1")
            if _SANE_REQUEST_ID.fullmatch(sent):
                return sent
            break
    return uuid.uuid4().hex


def method_label(scope: Scope) -> str:
    """The request method, or ``other``: a client picks the method, and every label value
    is a series kept for the life of the process."""
    method = str(scope.get("method", ""))
    return method if method in METHODS else "other"


def route_template(scope: Scope) -> str:
    """The path template of the route that served the request, or the unmatched label."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else metrics.UNMATCHED_ROUTE


class Observability:
    """Pure ASGI middleware (no extra task, so the log context reaches the handlers)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status, response_started = message["status"], True
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        with logs.bind(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                # Answered here rather than by the server-error layer outside, so that the
                # 500 carries the request id and is logged with it.
                log.exception("unhandled error")
                if response_started:
                    raise
                await internal_error_response()(scope, receive, send_with_id)
            finally:
                elapsed = time.perf_counter() - started
                metrics.http_request(route_template(scope), method_label(scope), status, elapsed)
