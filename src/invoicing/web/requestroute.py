"""A route class for handlers that take the request and nothing else (the API's hot paths).

An API route reads its input raw (signature mode signs it as sent) and writes its answer
itself (``Answer``), so FastAPI has nothing to resolve for it: no parameters, no
dependencies, no response model. FastAPI's request handler still does its general work at
every request (the dependency solver, which also parses the request's cookies, the body and
telemetry hooks, the endpoint's description for error messages): about a tenth of a create's
CPU time before any of the service's own work. ``RequestRoute`` calls such a handler
directly; the route is otherwise FastAPI's own (matching, the OpenAPI document, the
exception handlers around it, the body size limit). A handler with any parameter FastAPI
would resolve, or any dependency, gets FastAPI's handler as usual.

A router opts in with ``APIRouter(route_class=RequestRoute)``; its handlers must return a
``Response`` (``Answer``), which FastAPI would pass through unchanged too. Dependencies given
to the router or the route turn the route back to FastAPI's handler; the app includes such a
router without dependencies of its own (``include_router(router)``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response


def takes_request_only(dependant: Dependant) -> bool:
    """Whether FastAPI would hand the endpoint only the request: an ``async def`` with one
    ``Request`` parameter, nothing else to resolve and no dependency."""
    return (
        dependant.request_param_name is not None
        and inspect.iscoroutinefunction(dependant.call)
        and not (
            dependant.path_params
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.body_params
            or dependant.dependencies
            or dependant.websocket_param_name
            or dependant.http_connection_param_name
            or dependant.response_param_name
            or dependant.background_tasks_param_name
            or dependant.security_scopes_param_name
        )
    )


class RequestRoute(APIRoute):
    """An ``APIRoute`` whose request-only handlers are called directly (module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if not takes_request_only(self.dependant) or self.dependencies:
            return handler
        endpoint: Callable[[Request], Coroutine[Any, Any, Response]] = self.dependant.call  # type: ignore[assignment]

        async def call_endpoint(request: Request) -> Response:
            return await endpoint(request)  # its only parameter

        return call_endpoint
