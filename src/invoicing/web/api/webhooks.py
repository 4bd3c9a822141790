"""GET /integration/invoices/webhooks: an invoice's paid-webhook deliveries and attempts."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from invoicing.errors import NotFound
from invoicing.invoices.service import find_by_payment_address
from invoicing.notifications.service import paid_webhook_log
from invoicing.web.api.deps import authorized_query
from invoicing.web.api.event_responses import WebhookLog
from invoicing.web.api.inputs import Address
from invoicing.web.context import services_of
from invoicing.web.routedocs import OWNER_ROUTE_ERRORS, Answer, documented

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
        sdk="invoices.webhooks",
    ),
)
async def list_webhooks(request: Request) -> Answer[WebhookLog]:
    services = services_of(request)
    query, caller = await authorized_query(request, "invoice.webhooks", WebhooksQuery)
    invoice = await find_by_payment_address(services.db, caller.owner_key, query.paymentAddress)
    log = await paid_webhook_log(services.db, invoice.id, invoice.payment_address)
    return Answer(WebhookLog.of(log))
