"""Routes of docs/integration/invoices.md: create, status, list and delete invoices."""

from __future__ import annotations

import json
from typing import Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from invoicing.auth.guard import Caller
from invoicing.errors import (
    ChainUnavailable,
    InvoiceExists,
    NotFound,
    PriceUnavailable,
    UnknownCurrency,
    UnpricedCurrency,
    UnsupportedChain,
    UnsupportedToken,
)
from invoicing.invoices.create import CreateRules, NewInvoice, create_invoice
from invoicing.invoices.create_batch import WatchedCapReached
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.links import MAX_URL_CHARS
from invoicing.invoices.service import (
    InvoiceFilter,
    delete_invoice,
    find_by_payment_address,
    list_invoices,
)
from invoicing.monitor.check import recheck_invoice
from invoicing.ratelimit import DAY_MS, hit_deferred
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.tables.invoices import InvoiceRow
from invoicing.web.api.deps import (
    authorized_body,
    authorized_query,
    count_for_request,
    uncount,
)
from invoicing.web.api.inputs import Address
from invoicing.web.api.invoice_views import owner_views
from invoicing.web.api.responses import DeleteResult, InvoiceList, InvoiceStatusResult
from invoicing.web.api.responses import Invoice as InvoiceOut
from invoicing.web.context import services_of
from invoicing.web.requestroute import RequestRoute
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    OWNER_ROUTE_ERRORS,
    Answer,
    Written,
    documented,
)

router = APIRouter(prefix="/integration/invoices", tags=["invoices"], route_class=RequestRoute)

MAX_METADATA_BYTES = 16 * 1024


class CreateInvoiceBody(BaseModel):
    """Body of POST /integration/invoices."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    amount: str = Field(
        max_length=100,
        description="In the token's units, or with `currency` a price in that currency.",
    )
    currency: str | None = Field(
        default=None,
        max_length=16,
        description="ISO 4217 code (USD, EUR): `amount` is a price in it, locked into the "
        "token amount at creation (docs: Pricing).",
    )
    invoiceId: str | None = Field(default=None, min_length=1, max_length=128)
    tokenAddress: Address | None = None
    webhookUrl: str | None = Field(default=None, max_length=2048)
    description: str | None = Field(default=None, max_length=1000)
    expiresAt: int | None = Field(default=None, gt=0, lt=2**63)
    metadata: dict[str, Any] | None = None
    redirectUrl: str | None = Field(
        default=None,
        max_length=MAX_URL_CHARS,
        description="http(s) (https outside development), at most 2,048 characters: the "
        "payment page offers it after payment and goes there after a short countdown.",
    )
    cancelUrl: str | None = Field(
        default=None,
        max_length=MAX_URL_CHARS,
        description="Same rules: the page's way back to the shop without paying.",
    )

    capture: Literal["automatic", "manual"] = Field(
        "automatic", description="manual: paid funds wait for a capture (docs: Invoices)."
    )

    @field_validator("webhookUrl")
    @classmethod
    def _absolute_http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http(s) URL")
        return value

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value, separators=(",", ":"))) > MAX_METADATA_BYTES:
            raise ValueError("must be at most 16 KiB when serialized")
        return value


class ListQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int | None = Field(default=None, gt=0, lt=2**63)
    status: str | None = Field(default=None, json_schema_extra={"enum": list(InvoiceStatus)})
    paid: bool | None = None
    tokenAddress: Address | None = None
    invoiceId: str | None = Field(default=None, max_length=128)
    page: int = Field(default=1, ge=1, lt=2**31)
    limit: int = Field(default=20, ge=1, description="Capped at 100.")
    dateFrom: int | None = Field(default=None, ge=0, lt=2**63)
    dateTo: int | None = Field(default=None, ge=0, lt=2**63)

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str | None) -> str | None:
        if value is not None and value not in tuple(InvoiceStatus):
            raise ValueError(f"must be one of {', '.join(InvoiceStatus)}")
        return value

    @field_validator("paid", mode="before")
    @classmethod
    def _strict_bool(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in ("true", "false"):
            raise ValueError("must be true or false")
        return value


class StatusQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    paymentAddress: Address


class DeleteQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    invoiceId: str = Field(min_length=1, max_length=128)


def create_rules(settings: Settings) -> CreateRules:
    """The settings' limits on new invoices: the watched cap and the webhookUrl rules."""
    return CreateRules(
        max_watched_per_owner=settings.max_watched_invoices_per_owner,
        require_https_webhook=settings.environment != "development"
        and not settings.webhook_allow_http,
        allow_private_webhook=settings.webhook_allow_private,
        require_https_links=settings.environment != "development",
        late_payment_window_s=settings.late_payment_window_s,
        quote_window_s=settings.quote_window_s,
    )


@router.post(
    "",
    **documented(
        "Create an invoice",
        ok=InvoiceOut,
        status=201,
        ok_description="Created",
        body=CreateInvoiceBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            UnsupportedChain,
            UnsupportedToken,
            UnknownCurrency,
            UnpricedCurrency,
            InvoiceExists,
            PriceUnavailable,
        ),
        other_responses={
            200: {"model": InvoiceOut, "description": "An identical retry: the existing invoice"}
        },
        action="invoice.create",
        sdk="invoices.create",
    ),
)
async def create(request: Request) -> Answer[InvoiceOut]:
    services = services_of(request)
    # A signed create's timestamp is recorded in the create's own transaction. Until it is,
    # the request may be a replay, not the owner's: refused before that (a replay, a bad
    # body, a limit), it spends none of the owner's rate limits. Refused by the transaction
    # that recorded it (an invoiceId conflict, the watched cap), it counts.
    try:
        body, caller = await authorized_body(
            request, "invoice.create", CreateInvoiceBody, record_use=False
        )
        counted = await hit_deferred(
            services.db,
            [f"invoice-create-owner:{caller.owner_key}"],
            services.settings.invoice_creation_per_owner_per_day,
            services.clock.now_ms(),
            window_ms=DAY_MS,
        )
        if caller.replay_key() is not None:
            count_for_request(request, counted)
        invoice, created = await _create(services, body, caller)
    except (InvoiceExists, WatchedCapReached):
        raise
    except Exception:
        uncount(request)
        raise
    # A new invoice's escrow holds nothing yet; an identical retry may return an old one.
    (view,) = await owner_views(services, [invoice], fresh=created)
    return Answer(Written(view), status_code=201 if created else 200)


async def _create(
    services: Services, body: CreateInvoiceBody, caller: Caller
) -> tuple[InvoiceRow, bool]:
    chain = services.chains.get(body.chainId)
    return await create_invoice(
        services.db,
        chain,
        NewInvoice(
            owner_address=body.ownerAddress,
            chain_id=body.chainId,
            amount=body.amount,
            invoice_id=body.invoiceId,
            token_address=body.tokenAddress,
            webhook_url=body.webhookUrl,
            description=body.description,
            expires_at=body.expiresAt,
            metadata=body.metadata,
            redirect_url=body.redirectUrl,
            cancel_url=body.cancelUrl,
            currency=body.currency,
            capture=body.capture,
        ),
        caller,
        services.clock.now_ms(),
        services.settings.default_expiry_s,
        create_rules(services.settings),
    )


@router.get(
    "/status",
    **documented(
        "Look up one invoice by paymentAddress (live re-check)",
        ok=InvoiceStatusResult,
        query=StatusQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound, UnsupportedChain, ChainUnavailable),
        action="invoice.status",
        sdk="invoices.status",
    ),
)
async def status(request: Request) -> Answer[InvoiceStatusResult]:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.status", StatusQuery)
    found = await find_by_payment_address(services.db, caller.owner_key, query.paymentAddress)
    invoice = await recheck_invoice(services, found)
    # An answer other than the row as found was checked now (or stored by the check).
    (view,) = await owner_views(services, [invoice], checked_now=invoice is not found)
    return Answer(Written({"invoice": view}))


@router.get(
    "",
    **documented(
        "List an owner's invoices",
        ok=InvoiceList,
        query=ListQuery,
        errors=OWNER_ROUTE_ERRORS,
        action="invoice.list",
        sdk=("invoices.page", "invoices.list"),
    ),
)
async def list_(request: Request) -> Answer[InvoiceList]:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.list", ListQuery)
    limit_ = min(query.limit, 100)
    invoices, total = await list_invoices(
        services.db,
        InvoiceFilter(
            owner_key=caller.owner_key,
            chain_id=query.chainId,
            status=query.status,
            paid=query.paid,
            token_address=query.tokenAddress,
            invoice_id=query.invoiceId,
            date_from=query.dateFrom,
            date_to=query.dateTo,
            page=query.page,
            limit=limit_,
        ),
    )
    items = await owner_views(services, invoices)
    return Answer(Written({"items": items, "total": total, "page": query.page, "limit": limit_}))


@router.delete(
    "",
    **documented(
        "Soft-delete an invoice (idempotent: a repeat answers the same)",
        ok=DeleteResult,
        query=DeleteQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="invoice.delete",
        sdk="invoices.delete",
    ),
)
async def delete(request: Request) -> Answer[DeleteResult]:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.delete", DeleteQuery)
    invoice = await delete_invoice(
        services.db,
        caller.owner_key,
        query.chainId,
        query.invoiceId,
        services.clock.now_ms(),
        services.settings,
    )
    return Answer(
        DeleteResult(deleted=True, invoiceId=invoice.invoice_id, chainId=invoice.chain_id)
    )
