"""CORS by route: browser front ends on other origins may call the client-facing routes;
``/integration/*`` stays server-to-server unless the operator allows origins for it.

- ``/fees/*`` and ``/pay/<paymentAddress>/status`` (wallet front ends, a merchant's own
  checkout page): origins ``INVOICING_CORS_ALLOW_ORIGINS`` (default ``*``, any).
- ``/integration/*``: origins ``INVOICING_CORS_INTEGRATION_ALLOW_ORIGINS`` (default none).
  Allowing one exposes the API-key and signature headers to that origin's pages.
- Never ``Access-Control-Allow-Credentials``: no route reads cookies, and a browser must not
  send an origin's cookies along.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from an allowed origin for a
method the route serves is answered 204 here; any other preflight goes on to the app, whose
405 carries no CORS headers, so the browser refuses the call. Answers to allowed origins
carry ``Access-Control-Allow-Origin`` (``*``, or the origin itself with ``Vary: Origin``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from invoicing.auth.guard import API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from invoicing.setting_values import parse_origins

ANY = "*"
MAX_AGE_S = 600


@dataclass(frozen=True)
class CorsRule:
    """Which paths, which origins (``frozenset({"*"})`` for any), methods, request headers."""

    path: re.Pattern[str]
    origins: frozenset[str]
    methods: tuple[str, ...]
    headers: tuple[str, ...]

    def allows(self, origin: str) -> bool:
        return ANY in self.origins or origin in self.origins


def cors_rules(
    client_origins: str, integration_origins: str, integration_methods: Sequence[str]
) -> list[CorsRule]:
    """The rules; ``integration_methods`` are those the app's ``/integration/*`` routes serve
    (:func:`route_methods`), so a route added with a new method is allowed with it."""
    client = parse_origins(client_origins)
    integration = parse_origins(integration_origins)
    rules = [
        CorsRule(re.compile(r"^/fees/[^/]+$"), client, ("POST",), ("content-type",)),
        CorsRule(re.compile(r"^/pay/[^/]+/status$"), client, ("GET",), ()),
        CorsRule(
            re.compile(r"^/integration/"),
            integration,
            tuple(integration_methods),
            ("content-type", API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER),
        ),
    ]
    return [rule for rule in rules if rule.origins]


def route_methods(routes: Iterable[BaseRoute], prefix: str) -> tuple[str, ...]:
    """Every method that a route under ``prefix`` serves, sorted (``HEAD`` is implied)."""
    methods = {
        method
        for route in routes
        if isinstance(route, Route) and route.path.startswith(prefix)
        for method in route.methods or ()
    }
    return tuple(sorted(methods - {"HEAD", "OPTIONS"}))


class CorsByPath:
    """ASGI middleware applying the first rule whose path pattern matches."""

    def __init__(self, app: ASGIApp, rules: list[CorsRule]) -> None:
        self.app, self.rules = app, rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rule = next((r for r in self.rules if r.path.match(scope["path"])), None)
        headers = Headers(scope=scope) if rule is not None else None
        origin = headers.get("origin") if headers is not None else None
        if rule is None or headers is None or origin is None or not rule.allows(origin):
            await self.app(scope, receive, send)
            return
        wanted = headers.get("access-control-request-method")
        if scope["method"] == "OPTIONS" and wanted is not None:
            if wanted.upper() in rule.methods:
                await _preflight(send, rule, origin)
                return
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer = MutableHeaders(scope=message)
                for name, value in _allow_origin(rule, origin):
                    answer.append(name, value)
                answer.append("Access-Control-Expose-Headers", "Retry-After")
            await send(message)

        await self.app(scope, receive, with_cors)


def _allow_origin(rule: CorsRule, origin: str) -> list[tuple[str, str]]:
    if ANY in rule.origins:
        return [("Access-Control-Allow-Origin", ANY)]
    return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]


async def _preflight(send: Send, rule: CorsRule, origin: str) -> None:
    headers = [
        *_allow_origin(rule, origin),
        ("Access-Control-Allow-Methods", ", ".join(rule.methods)),
        ("Access-Control-Max-Age", str(MAX_AGE_S)),
    ]
    if rule.headers:
        headers.append(("Access-Control-Allow-Headers", ", ".join(rule.headers)))
    raw = [(name.lower().encode(), value.encode()) for name, value in headers]
    await send({"type": "http.response.start", "status": 204, "headers": raw})
    await send({"type": "http.response.body", "body": b""})
