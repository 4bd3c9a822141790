"""Subscriptions over HTTP (docs/integration/subscriptions.md): the owner's routes under
``/integration/subscriptions`` (API key or signed request, as invoices) and the payer's
``POST /subscribe/<id>/authorization`` (public, counted against the client's rate limit).

A method's routes belong to the web layer though they live in its folder: this module runs
up to ``web.api.deps``, ``web.api.inputs``, ``web.api.responses``, ``web.context``,
``web.page.routes`` and ``web.routedocs``.
"""

from __future__ import annotations

from typing import Annotated, Any, Self
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from invoicing.errors import (
    AuthorizationUsed,
    ChainUnavailable,
    Conflict,
    GaslessUnavailable,
    InsufficientBalance,
    InvalidAuthorization,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    UnsupportedChain,
    UnsupportedToken,
)
from invoicing.invoices.links import MAX_URL_CHARS
from invoicing.payments.subscriptions.cancellation import cancel_with_signature
from invoicing.payments.subscriptions.models import SubscriptionStatus
from invoicing.payments.subscriptions.periods import authorize
from invoicing.payments.subscriptions.permit import Permit, authorize_with_permit
from invoicing.payments.subscriptions.service import (
    NewSubscription,
    SubscriptionView,
    cancel_by_owner,
    create_subscription,
    list_subscriptions,
    owned_subscription,
    terms_of,
    view_of,
)
from invoicing.web.api.deps import authorized_body, authorized_query
from invoicing.web.api.inputs import Address, json_body, validate
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.page.routes import limit_client
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    PUBLIC,
    AddressOut,
    Answer,
    RawAmount,
    TxHash,
    documented,
)

router = APIRouter(prefix="/integration/subscriptions", tags=["subscriptions"])
payer_router = APIRouter(
    prefix="/subscribe", tags=["subscriptions"], dependencies=[Depends(limit_client)]
)


def _absolute_http_url(value: str) -> str:
    """As an invoice's ``webhookUrl``."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http(s) URL")
    return value


class CreateSubscriptionBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    tokenAddress: Address
    amount: str = Field(max_length=100, description="Per period, in the token's units.")
    periodSeconds: int = Field(gt=0, lt=2**40)
    maxPeriods: int = Field(default=0, ge=0, lt=2**32, description="0: no end.")
    subscriptionId: str | None = Field(default=None, min_length=1, max_length=128)
    description: str | None = Field(default=None, max_length=1000)
    redirectUrl: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    cancelUrl: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    webhookUrl: Annotated[str, AfterValidator(_absolute_http_url)] | None = Field(
        default=None, max_length=2048, description="Each period's invoice's paid webhook."
    )


class PermitBody(BaseModel):
    """The payer's EIP-2612 permit for the subscriptions contract, relayed before the first
    charge (docs/integration/subscriptions.md#permit)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    value: str = Field(
        pattern=r"^[0-9]{1,78}$", description="The allowance, raw units; at least one period."
    )
    deadline: int = Field(ge=0, lt=2**63, description="Seconds, as signed.")
    signature: str = Field(max_length=132, description="65 bytes of hex: r, s, v.")
    owner: Address | None = Field(default=None, description="If given, the payer.")
    spender: Address | None = Field(default=None, description="If given, the contract.")


class SubscriptionAuthorizationBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    signature: str = Field(max_length=4098)
    payer: Address | None = Field(default=None, description="A contract wallet names itself.")
    permit: PermitBody | None = Field(
        default=None, description="Relayed first, instead of the payer's approve."
    )


class SubscriptionCancellationBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    signature: str = Field(
        max_length=4098, description="The payer's or the owner's EIP-712 Cancel (65 bytes)."
    )


class SubscriptionQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    id: str = Field(min_length=1, max_length=36)


class SubscriptionListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    page: int = Field(default=1, ge=1, lt=2**31)
    limit: int = Field(default=20, ge=1, le=100)


class SubscriptionCharge(WireModel):
    period: int
    paymentAddress: AddressOut
    status: str = Field(description="The period's invoice's status.")
    chargeStatus: str | None = Field(
        description="submitted, confirmed, reverted (tried again), failed, or null before a try."
    )
    txHash: TxHash | None


class SubscriptionAuthorization(WireModel):
    spender: AddressOut = Field(description="The address to approve: the contract.")
    typedData: dict[str, Any] = Field(description="For eth_signTypedData_v4.")


class SubscriptionOut(WireModel):
    id: str
    subscriptionId: str | None
    ownerAddress: AddressOut
    chainId: int
    tokenAddress: AddressOut
    amount: str
    amountRaw: RawAmount
    periodSeconds: int
    maxPeriods: int
    status: str = Field(json_schema_extra={"enum": list(SubscriptionStatus)})
    url: str
    payer: AddressOut | None
    nextChargeAt: int | None = Field(description="ms; by the chain's block time.")
    description: str | None
    authorization: SubscriptionAuthorization
    charges: list[SubscriptionCharge]
    createdAt: int
    webhookUrl: str | None = Field(default=None, description="Omitted when not set.")

    @classmethod
    def of(cls, view: SubscriptionView, base_url: str) -> Self:
        sub = view.subscription
        terms = terms_of(sub)
        return cls(
            id=sub.id,
            subscriptionId=sub.subscription_ref,
            ownerAddress=sub.owner_address,
            chainId=sub.chain_id,
            tokenAddress=sub.token_address,
            amount=sub.amount,
            amountRaw=sub.amount_raw,
            periodSeconds=sub.period_seconds,
            maxPeriods=sub.max_periods,
            status=sub.status,
            url=f"{base_url.rstrip('/')}/subscribe/{sub.id}",
            payer=sub.payer,
            nextChargeAt=view.next_charge_at_ms,
            description=sub.description,
            authorization=SubscriptionAuthorization(
                spender=terms.contract, typedData=terms.typed_data(wire=True)
            ),
            charges=[
                SubscriptionCharge(
                    period=c.period,
                    paymentAddress=c.payment_address,
                    status=status,
                    chargeStatus=c.status,
                    txHash=tx,
                )
                for c, status, tx in view.charges
            ],
            createdAt=sub.created_at,
            **({"webhookUrl": sub.webhook_url} if sub.webhook_url is not None else {}),
        )


class SubscriptionResult(WireModel):
    subscription: SubscriptionOut


class SubscriptionList(WireModel):
    items: list[SubscriptionOut]
    total: int = Field(ge=0)
    page: int = Field(ge=1)
    limit: int = Field(ge=1, le=100)


@router.post(
    "",
    **documented(
        "Create a subscription awaiting its payer's signature",
        ok=SubscriptionOut,
        status=201,
        ok_description="Created",
        body=CreateSubscriptionBody,
        errors=(*BODY_ROUTE_ERRORS, UnsupportedChain, UnsupportedToken, Conflict),
        other_responses={200: {"model": SubscriptionOut, "description": "An identical retry"}},
        action="subscription.create",
        sdk="subscriptions.create",
    ),
)
async def create(request: Request) -> Answer[SubscriptionOut]:
    services = services_of(request)
    body, caller = await authorized_body(request, "subscription.create", CreateSubscriptionBody)
    sub, created = await create_subscription(
        services,
        NewSubscription(
            owner_address=body.ownerAddress,
            chain_id=body.chainId,
            token_address=body.tokenAddress,
            amount=body.amount,
            period_seconds=body.periodSeconds,
            max_periods=body.maxPeriods,
            subscription_ref=body.subscriptionId,
            description=body.description,
            redirect_url=body.redirectUrl,
            cancel_url=body.cancelUrl,
            webhook_url=body.webhookUrl,
        ),
        caller,
    )
    view = await view_of(services.db, sub)
    out = SubscriptionOut.of(view, services.settings.base_url)
    return Answer(out, status_code=201 if created else 200)


@router.get(
    "/status",
    **documented(
        "Look up one subscription with its charges",
        ok=SubscriptionResult,
        query=SubscriptionQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="subscription.status",
        sdk="subscriptions.status",
    ),
)
async def status(request: Request) -> Answer[SubscriptionResult]:
    services = services_of(request)
    query, caller = await authorized_query(request, "subscription.status", SubscriptionQuery)
    sub = await owned_subscription(services.db, caller.owner_key, query.id)
    view = await view_of(services.db, sub)
    return Answer(
        SubscriptionResult(subscription=SubscriptionOut.of(view, services.settings.base_url))
    )


@router.get(
    "",
    **documented(
        "List an owner's subscriptions",
        ok=SubscriptionList,
        query=SubscriptionListQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="subscription.list",
        sdk="subscriptions.list",
    ),
)
async def list_(request: Request) -> Answer[SubscriptionList]:
    services = services_of(request)
    query, caller = await authorized_query(request, "subscription.list", SubscriptionListQuery)
    views, total = await list_subscriptions(services.db, caller.owner_key, query.page, query.limit)
    base = services.settings.base_url
    items = [SubscriptionOut.of(view, base) for view in views]
    return Answer(SubscriptionList(items=items, total=total, page=query.page, limit=query.limit))


@router.delete(
    "",
    **documented(
        "Cancel a subscription (idempotent): nothing is charged for it any more",
        ok=SubscriptionResult,
        query=SubscriptionQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="subscription.cancel",
        sdk="subscriptions.cancel",
    ),
)
async def cancel(request: Request) -> Answer[SubscriptionResult]:
    services = services_of(request)
    query, caller = await authorized_query(request, "subscription.cancel", SubscriptionQuery)
    sub = await cancel_by_owner(services, caller.owner_key, query.id)
    view = await view_of(services.db, sub)
    return Answer(
        SubscriptionResult(subscription=SubscriptionOut.of(view, services.settings.base_url))
    )


@payer_router.post(
    "/{subscription_id}/authorization",
    **documented(
        "Authorize a subscription: the payer's signature; period 0 is charged at once",
        ok=SubscriptionResult,
        body=SubscriptionAuthorizationBody,
        auth=PUBLIC,
        errors=(
            InvalidRequest,
            GaslessUnavailable,
            InvalidAuthorization,
            InsufficientBalance,
            NotFound,
            AuthorizationUsed,
            PayloadTooLarge,
            RateLimited,
            ChainUnavailable,
        ),
        sdk="public.authorize_subscription",
    ),
)
async def submit(request: Request, subscription_id: str) -> Answer[SubscriptionResult]:
    services = services_of(request)
    body = validate(
        SubscriptionAuthorizationBody, await json_body(request, services.settings.max_body_bytes)
    )
    pk = subscription_id[:36]
    if body.permit is None:
        sub = await authorize(services, pk, body.signature, body.payer)
    else:
        p = body.permit
        permit = Permit(int(p.value), p.deadline, p.signature, p.owner, p.spender)
        sub = await authorize_with_permit(services, pk, body.signature, body.payer, permit)
    view = await view_of(services.db, sub)
    return Answer(
        SubscriptionResult(subscription=SubscriptionOut.of(view, services.settings.base_url))
    )


@payer_router.post(
    "/{subscription_id}/cancellation",
    **documented(
        "Cancel a subscription by the payer's (or the owner's) signed Cancel, relayed on chain",
        ok=SubscriptionResult,
        body=SubscriptionCancellationBody,
        auth=PUBLIC,
        errors=(
            InvalidRequest,
            GaslessUnavailable,
            InvalidAuthorization,
            NotFound,
            Conflict,
            PayloadTooLarge,
            RateLimited,
            ChainUnavailable,
        ),
        sdk="public.cancel_subscription",
    ),
)
async def cancellation(request: Request, subscription_id: str) -> Answer[SubscriptionResult]:
    services = services_of(request)
    body = validate(
        SubscriptionCancellationBody, await json_body(request, services.settings.max_body_bytes)
    )
    sub = await cancel_with_signature(services, subscription_id[:36], body.signature)
    view = await view_of(services.db, sub)
    return Answer(
        SubscriptionResult(subscription=SubscriptionOut.of(view, services.settings.base_url))
    )
