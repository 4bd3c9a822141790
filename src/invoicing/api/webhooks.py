"""GET /integration/invoices/webhooks: an invoice's paid-webhook deliveries and attempts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from invoicing.api.deps import authorized_query, services_of
from invoicing.api.inputs import Address
from invoicing.webhooks.service import list_deliveries

router = APIRouter(prefix="/integration/invoices", tags=["webhooks"])


class WebhooksQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ownerAddress: Address
    paymentAddress: Address


@router.get("/webhooks", summary="List an invoice's webhook delivery attempts")
async def list_webhooks(
    request: Request,
    ownerAddress: Annotated[str, Query()],
    paymentAddress: Annotated[str, Query()],
) -> JSONResponse:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.webhooks", WebhooksQuery)
    return JSONResponse(await list_deliveries(services.db, caller.owner_key, query.paymentAddress))
