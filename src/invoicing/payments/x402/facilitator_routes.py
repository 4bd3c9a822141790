"""The x402 v2 facilitator's HTTP routes (``payments.x402.facilitator``):
``POST /x402/facilitator/verify``, ``POST /x402/facilitator/settle`` and
``GET /x402/facilitator/supported``. Each call carries the owner's API key; the key names the
owner (the bodies are the x402 specification's, with no ownerAddress).

Verify and settle count against the owner's ``x402_facilitator_per_minute`` (each costs node
calls) besides its API limit; a request with no valid key counts against its client network's
``pay_rate_limit_per_minute`` before it is refused, so guessing keys is bounded too.

A method's routes belong to the web layer though they live in its folder: this module runs up
to ``web.api.deps``, ``web.api.inputs``, ``web.api.responses``, ``web.context`` and
``web.routedocs``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from invoicing.auth.admission import check_admitted
from invoicing.auth.api_keys import lookup_active_key
from invoicing.auth.guard import API_KEY_HEADER
from invoicing.errors import (
    ChainUnavailable,
    Forbidden,
    InvalidRequest,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
)
from invoicing.payments.x402.facilitator import settle, supported, verify
from invoicing.ratelimit import hit_deferred
from invoicing.web.api.deps import count_bad_credential
from invoicing.web.api.inputs import json_body
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import Answer, documented

router = APIRouter(prefix="/x402/facilitator", tags=["x402 facilitator"])


class VerifyResponse(WireModel):
    """x402 v2 VerifyResponse."""

    isValid: bool
    invalidReason: str | None = Field(default=None, description="Present only when invalid.")
    payer: str


class SettleResponse(WireModel):
    """x402 v2 SettleResponse (``transaction`` empty when nothing was settled)."""

    success: bool
    errorReason: str | None = Field(default=None, description="Present only on failure.")
    payer: str
    transaction: str
    network: str


class SupportedKind(WireModel):
    x402Version: int
    scheme: str
    network: str


class SupportedResponse(WireModel):
    """x402 v2 SupportedResponse: the exact scheme per chain, and the relayers' addresses."""

    kinds: list[SupportedKind]
    extensions: list[str]
    signers: dict[str, list[str]]


KEY_ONLY: list[dict[str, list[str]]] = [{"apiKey": []}]
_ERRORS = (InvalidRequest, Unauthorized, Forbidden, RateLimited, ChainUnavailable)


async def _owner(request: Request) -> str:
    """The owner of the request's API key (401 without a valid one), counted against its
    rate limit like any authenticated call."""
    services = services_of(request)
    settings, now_ms = services.settings, services.clock.now_ms()
    api_key = request.headers.get(API_KEY_HEADER)
    found = None if api_key is None else await lookup_active_key(services.db, api_key)
    if found is None:
        await count_bad_credential(request)
        raise Unauthorized("the facilitator needs the owner's API key (x-service-api-key)")
    check_admitted(services.db, settings.owners, found.owner_key)
    limit = settings.owner_rate_limit_per_minute
    await hit_deferred(services.db, [f"api-owner:{found.owner_key}"], limit, now_ms)
    return found.owner_key


async def _facilitating_owner(request: Request) -> str:
    """``_owner``, also counted against the owner's facilitator limit (verify and settle
    read the chain)."""
    owner = await _owner(request)
    services = services_of(request)
    limit = services.settings.x402_facilitator_per_minute
    await hit_deferred(services.db, [f"x402-owner:{owner}"], limit, services.clock.now_ms())
    return owner


def _doc(summary: str, ok: type[BaseModel], action: str, body: bool = True) -> dict[str, Any]:
    """The route's documentation: API key only (``action`` names it, and its SDK method, for
    the SDKs, which send the key; a request signature is not taken)."""
    errors = (*_ERRORS, PayloadTooLarge) if body else _ERRORS
    return documented(summary, ok=ok, errors=errors, auth=KEY_ONLY, action=action, sdk=action)


@router.post("/verify", **_doc("x402 verify", VerifyResponse, "facilitator.verify"))
async def facilitator_verify(request: Request) -> Answer[VerifyResponse]:
    owner = await _facilitating_owner(request)
    services = services_of(request)
    body = await json_body(request, services.settings.max_body_bytes)
    return Answer(VerifyResponse.model_validate(await verify(services, owner, body)))


@router.post("/settle", **_doc("x402 settle", SettleResponse, "facilitator.settle"))
async def facilitator_settle(request: Request) -> Answer[SettleResponse]:
    owner = await _facilitating_owner(request)
    services = services_of(request)
    body = await json_body(request, services.settings.max_body_bytes)
    return Answer(SettleResponse.model_validate(await settle(services, owner, body)))


@router.get(
    "/supported", **_doc("x402 supported", SupportedResponse, "facilitator.supported", False)
)
async def facilitator_supported(request: Request) -> Answer[SupportedResponse]:
    await _owner(request)
    return Answer(SupportedResponse.model_validate(supported(services_of(request))))
