"""Shared pieces of the route handlers: authenticate the request as sent, then validate it."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel

from invoicing import logs
from invoicing.auth.admission import check_admitted
from invoicing.auth.guard import Caller, SignedRequest, authenticate
from invoicing.auth.signatures import QueryTypes
from invoicing.errors import Unauthorized
from invoicing.ratelimit import Counted, hit_deferred
from invoicing.web.api.inputs import (
    json_body,
    owner_address_of,
    query_items,
    query_types,
    validate,
    without_owner,
)
from invoicing.web.context import client_network, services_of

Model = TypeVar("Model", bound=BaseModel)


async def authorize(
    request: Request,
    action: str,
    owner_address: str,
    payload: dict[str, Any],
    *,
    query_types: QueryTypes | None = None,
    allow_api_key: bool = True,
    record_use: bool = True,
) -> Caller:
    """Authenticate the request for ``action`` on behalf of ``owner_address``: an owner
    the service does not admit is refused first (403), then the credential is checked, then
    the request counts against the owner's rate limit (only once authenticated, so nobody
    else can spend an owner's limit).

    ``record_use=False``: a signed request's timestamp is recorded by the route in the
    transaction of its writes (``Caller.replay_key``); should that find a replay, the route
    takes the request's rate-limit hits back (``uncount``)."""
    services = services_of(request)
    logs.annotate(owner=owner_address, chain_id=_chain_id_of(payload))
    check_admitted(services.db, services.settings.owners, owner_address)
    try:
        caller = await authenticate(
            services.db,
            request.headers,
            SignedRequest(action, owner_address, payload, query_types),
            services.clock.now_ms(),
            services.settings.signature_window_s,
            allow_api_key=allow_api_key,
            record_use=record_use,
        )
    except Unauthorized:
        await count_bad_credential(request)
        raise
    counted = await hit_deferred(
        services.db,
        [f"api-owner:{caller.owner_key}"],
        services.settings.owner_rate_limit_per_minute,
        services.clock.now_ms(),
    )
    if caller.replay_key() is not None:
        _counted_of(request).append(counted)
    return caller


async def count_bad_credential(request: Request) -> None:
    """A request refused for its credential counts against its client network's
    ``pay_rate_limit_per_minute`` (429 past it), so guessing keys or signatures is bounded
    like any public route; an owner's own limit is never spent by strangers."""
    services = services_of(request)
    settings = services.settings
    client = client_network(request, settings.trusted_proxies)
    await hit_deferred(
        services.db,
        [f"bad-credential-ip:{client}"],
        settings.pay_rate_limit_per_minute,
        services.clock.now_ms(),
    )


def count_for_request(request: Request, counted: Counted) -> None:
    """Hits a route counted for a request whose replay key is not recorded yet."""
    _counted_of(request).append(counted)


def uncount(request: Request) -> None:
    """Take back the rate-limit hits of a request found to be a replay."""
    for counted in _counted_of(request):
        counted.undo()


def _counted_of(request: Request) -> list[Counted]:
    found: list[Counted] | None = getattr(request.state, "rate_limit_hits", None)
    if found is None:
        found = request.state.rate_limit_hits = []
    return found


async def authorized_body(
    request: Request,
    action: str,
    model: type[Model],
    *,
    allow_api_key: bool = True,
    max_bytes: int | None = None,
    record_use: bool = True,
) -> tuple[Model, Caller]:
    """A JSON body checked against the caller's credential (signed as sent), then validated;
    ``max_bytes``: a route's own body limit instead of ``INVOICING_MAX_BODY_BYTES``."""
    limit = services_of(request).settings.max_body_bytes if max_bytes is None else max_bytes
    data = await json_body(request, limit)
    caller = await authorize(
        request,
        action,
        owner_address_of(data),
        without_owner(data),
        allow_api_key=allow_api_key,
        record_use=record_use,
    )
    return validate(model, data), caller


async def authorized_query(
    request: Request, action: str, model: type[Model], *, allow_api_key: bool = True
) -> tuple[Model, Caller]:
    """Query parameters checked against the caller's credential (signed as sent), validated."""
    items = query_items(request)
    caller = await authorize(
        request,
        action,
        owner_address_of(items),
        without_owner(items),
        query_types=query_types(model),
        allow_api_key=allow_api_key,
    )
    return validate(model, items), caller


def _chain_id_of(payload: dict[str, Any]) -> int | None:
    """The request's chainId for the log context, when it is one (else left out)."""
    value = payload.get("chainId")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
