"""Python client of the self-hosted invoicing service.

    from invoicing_client import Client

    with Client("http://127.0.0.1:8000", "0xOwner…", api_key="…") as client:
        invoice = client.invoices.create(31337, "1.5", invoice_id="order-1")
        redirect_to(invoice.url)

``AsyncClient`` offers the same for asyncio. Both cover every route of the service:
``invoices``, ``fees``, ``api_keys``, ``webhook_secrets``, ``webhook_endpoints``, ``events``,
``escrows``, ``settings`` and ``public`` (no credential). ``invoicing_client.webhooks.verify``
checks a webhook before you act on it; every error answer raises the exception of its code
(``invoicing_client.errors``). Amounts in token units are decimal strings; raw amounts and
nonces are ints.
"""

from invoicing_client import errors, models, webhooks
from invoicing_client._async_client import AsyncClient
from invoicing_client._calls import INVOICE_TOKEN, InvoicePage
from invoicing_client._sync_client import Client
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
    "INVOICE_TOKEN",
    "Invoice",
    "InvoicePage",
    "InvoicingError",
    "IssuedApiKey",
    "RevokedApiKey",
    "ServiceUnreachable",
    "WebhookEvent",
    "errors",
    "models",
    "webhooks",
]
