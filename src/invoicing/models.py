"""Imports every table so ``Base.metadata`` is complete (Alembic and tests use it)."""

from invoicing.auth.models import ApiKey, UsedRequestTimestamp
from invoicing.db import Base
from invoicing.invoices.models import Invoice, OwnerSequence
from invoicing.webhooks.models import WebhookAttempt, WebhookEvent

__all__ = [
    "ApiKey",
    "Base",
    "Invoice",
    "OwnerSequence",
    "UsedRequestTimestamp",
    "WebhookAttempt",
    "WebhookEvent",
]
