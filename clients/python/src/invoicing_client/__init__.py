"""Python client of the self-hosted invoicing service.

    from invoicing_client import Client

    with Client("http://127.0.0.1:8000", "0xOwner…", api_key="…") as client:
        invoice = client.invoices.create(31337, "1.5", invoice_id="order-1")
        redirect_to(invoice.url)

``AsyncClient`` offers the same for asyncio; ``invoicing_client.webhooks.verify`` checks a
webhook before you act on it; every error answer raises the exception of its code
(``invoicing_client.errors``).
"""

from invoicing_client import errors, webhooks
from invoicing_client._calls import InvoicePage
from invoicing_client._client import AsyncClient, Client
from invoicing_client.errors import ApiError, InvoicingError, ServiceUnreachable
from invoicing_client.models import (
    ApiKey,
    CreatedInvoice,
    DeletedInvoice,
    FeeSettings,
    FeeSubmission,
    Invoice,
    IssuedApiKey,
    RevokedApiKey,
    WebhookEvent,
)

__all__ = [
    "ApiError",
    "ApiKey",
    "AsyncClient",
    "Client",
    "CreatedInvoice",
    "DeletedInvoice",
    "FeeSettings",
    "FeeSubmission",
    "Invoice",
    "InvoicePage",
    "InvoicingError",
    "IssuedApiKey",
    "RevokedApiKey",
    "ServiceUnreachable",
    "WebhookEvent",
    "errors",
    "webhooks",
]
