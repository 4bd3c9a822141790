"""Shared pieces of the route handlers."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from invoicing.auth.guard import Caller, SignedRequest, authenticate
from invoicing.services import Services


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def authorize(
    request: Request,
    action: str,
    owner_address: str,
    payload: dict[str, Any],
    *,
    from_query: bool,
    allow_api_key: bool = True,
) -> Caller:
    """Authenticate the request for ``action`` on behalf of ``owner_address``."""
    services = services_of(request)
    return await authenticate(
        services.db,
        request.headers,
        SignedRequest(action, owner_address, payload, from_query),
        services.clock.now_ms(),
        services.settings.signature_window_s,
        allow_api_key=allow_api_key,
    )
