"""GET /integration/invoices/webhooks: an invoice's paid-webhook deliveries and attempts."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from invoicing.errors import NotFound
from invoicing.web.api.deps import authorized_query
from invoicing.web.api.inputs import Address
from invoicing.web.api.responses import WebhookLog
from invoicing.web.context import services_of
from invoicing.web.routedocs import OWNER_ROUTE_ERRORS, documented
from invoicing.webhooks.service import list_deliveries

router = APIRouter(prefix="/integration/invoices", tags=["webhooks"])


class WebhooksQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    paymentAddress: Address


@router.get(
    "/webhooks",
    **documented(
        "List an invoice's webhook delivery attempts",
        ok=WebhookLog,
        query=WebhooksQuery,
        errors=(*OWNER_ROUTE_ERRORS, NotFound),
        action="invoice.webhooks",
    ),
)
async def list_webhooks(request: Request) -> JSONResponse:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.webhooks", WebhooksQuery)
    return JSONResponse(await list_deliveries(services.db, caller.owner_key, query.paymentAddress))
