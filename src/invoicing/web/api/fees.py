"""Routes of docs/integration/fees.md: gasless owner settings (SetFee, SetPayout) and reading them.

``/integration/fees/*`` need request authentication; the client-facing
``/fees/*`` routes take the same bodies with the EIP-712 signature as the only
authorization, rate limited per client IP and per owner.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from invoicing.auth.admission import check_admitted
from invoicing.chain.calldata import MAX_FEE_BPS
from invoicing.errors import (
    ChainUnavailable,
    DeadlineExpired,
    FeeTooHigh,
    Forbidden,
    InvalidOwnerSignature,
    InvalidRequest,
    NonceMismatch,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UnsupportedChain,
)
from invoicing.fees.service import MetaRequest, fee_settings, submit_meta
from invoicing.ratelimit import hit
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import (
    UINT256_MAX,
    Address,
    DecimalUint,
    json_body,
    owner_address_of,
    validate,
)
from invoicing.web.api.responses import FeeSettings, FeeSubmission
from invoicing.web.context import client_network, services_of
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    PUBLIC,
    Answer,
    documented,
)

router = APIRouter(tags=["fees"])


class _MetaBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    nonce: DecimalUint = Field(description="The owner's current factory nonce (nonces(owner)).")
    deadline: DecimalUint = Field(
        description="Unix time in seconds. A value over 10^12 is taken as milliseconds and "
        "divided by 1000: the EIP-712 signature must cover that value in seconds (the one "
        "relayed on-chain), whichever unit was sent."
    )
    signature: str = Field(max_length=4098, description="The owner's EIP-712 signature (hex).")


class SetFeeBody(_MetaBody):
    """Body of POST /integration/fees/set-meta and /fees/set-meta."""

    # Larger values are refused with 400 fee_too_high (not invalid_request).
    feeBps: int = Field(ge=0, le=UINT256_MAX, json_schema_extra={"maximum": MAX_FEE_BPS})


class SetPayoutBody(_MetaBody):
    """Body of POST /integration/fees/set-payout-meta and /fees/set-payout-meta."""

    payoutAddress: Address


class FeesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    paymentAddress: Address | None = Field(
        default=None,
        description="One of the owner's escrows: the settings and nonce of the factory that "
        "made it (after a factory upgrade, the previous factory for an older escrow), which "
        "its Refund is signed for.",
    )


META_ERRORS = (
    UnsupportedChain,
    FeeTooHigh,
    DeadlineExpired,
    InvalidOwnerSignature,
    NonceMismatch,
    RateLimited,
    ChainUnavailable,
)
# The client-facing routes: no request authentication, so no 401.
CLIENT_META_ERRORS = (InvalidRequest, Forbidden, PayloadTooLarge, *META_ERRORS)


def _fee_request(body: SetFeeBody) -> MetaRequest:
    return MetaRequest(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        nonce=body.nonce,
        deadline=body.deadline,
        signature=body.signature,
        fee_bps=body.feeBps,
    )


def _payout_request(body: SetPayoutBody) -> MetaRequest:
    return MetaRequest(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        nonce=body.nonce,
        deadline=body.deadline,
        signature=body.signature,
        payout_address=body.payoutAddress,
    )


async def _submit(request: MetaRequest, http: Request) -> Answer[FeeSubmission]:
    accepted = await submit_meta(services_of(http), request)
    return Answer(FeeSubmission.of(accepted), status_code=202)


async def _client_body(request: Request) -> dict[str, Any]:
    """Rate limit by client network, read the body, refuse an owner the service does not
    admit, then rate limit by owner too."""
    services = services_of(request)
    settings = services.settings
    limit = settings.fee_rate_limit_per_minute
    client = client_network(request, settings.trusted_proxies)
    await hit(services.db, [f"fees-ip:{client}"], limit, services.clock.now_ms())
    data = await json_body(request, settings.max_body_bytes)
    owner = owner_address_of(data)
    check_admitted(services.db, settings.owners, owner)
    await hit(services.db, [f"fees-owner:{owner.lower()}"], limit, services.clock.now_ms())
    return data


@router.post(
    "/integration/fees/set-meta",
    **documented(
        "Relay an owner-signed SetFee",
        ok=FeeSubmission,
        status=202,
        body=SetFeeBody,
        errors=(*BODY_ROUTE_ERRORS, *META_ERRORS),
        action="fee.set-meta",
        sdk="fees.set_fee",
    ),
)
async def integration_set_fee(request: Request) -> Answer[FeeSubmission]:
    body, _caller = await authorized_body(request, "fee.set-meta", SetFeeBody)
    return await _submit(_fee_request(body), request)


@router.post(
    "/integration/fees/set-payout-meta",
    **documented(
        "Relay an owner-signed SetPayout",
        ok=FeeSubmission,
        status=202,
        body=SetPayoutBody,
        errors=(*BODY_ROUTE_ERRORS, *META_ERRORS),
        action="fee.set-payout-meta",
        sdk="fees.set_payout",
    ),
)
async def integration_set_payout(request: Request) -> Answer[FeeSubmission]:
    body, _caller = await authorized_body(request, "fee.set-payout-meta", SetPayoutBody)
    return await _submit(_payout_request(body), request)


@router.get(
    "/integration/fees",
    **documented(
        "An owner's fee settings, read from the chain",
        ok=FeeSettings,
        query=FeesQuery,
        errors=(*OWNER_ROUTE_ERRORS, UnsupportedChain, NotFound, ChainUnavailable),
        action="fee.get",
        sdk="fees.get",
    ),
)
async def get_fees(request: Request) -> Answer[FeeSettings]:
    query, _caller = await authorized_query(request, "fee.get", FeesQuery)
    found = await fee_settings(
        services_of(request), query.chainId, query.ownerAddress, query.paymentAddress
    )
    return Answer(FeeSettings.of(found))


@router.post(
    "/fees/set-meta",
    **documented(
        "Relay an owner-signed SetFee (wallet front ends; CORS; rate limited)",
        sdk="public.relay_fee",
        ok=FeeSubmission,
        status=202,
        body=SetFeeBody,
        errors=CLIENT_META_ERRORS,
        auth=PUBLIC,
    ),
)
async def client_set_fee(request: Request) -> Answer[FeeSubmission]:
    data = await _client_body(request)
    return await _submit(_fee_request(validate(SetFeeBody, data)), request)


@router.post(
    "/fees/set-payout-meta",
    **documented(
        "Relay an owner-signed SetPayout (wallet front ends; CORS; rate limited)",
        sdk="public.relay_payout",
        ok=FeeSubmission,
        status=202,
        body=SetPayoutBody,
        errors=CLIENT_META_ERRORS,
        auth=PUBLIC,
    ),
)
async def client_set_payout(request: Request) -> Answer[FeeSubmission]:
    data = await _client_body(request)
    return await _submit(_payout_request(validate(SetPayoutBody, data)), request)
