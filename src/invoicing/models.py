"""Imports every table so ``Base.metadata`` is complete (Alembic and tests use it)."""

from invoicing.auth.models import ApiKey, UsedRequestTimestamp
from invoicing.db import Base
from invoicing.invoices.models import Invoice, OwnerSequence
from invoicing.ratelimit import RateLimitWindow
from invoicing.refunds.models import Refund
from invoicing.settlement.models import (
    EscrowAsset,
    MetaTransaction,
    ParkedEscrow,
    RelayerAccount,
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
)
from invoicing.webhooks.models import WebhookAttempt, WebhookEndpoint, WebhookEvent
from invoicing.webhooks.signing import OwnerSettings, WebhookSecret

__all__ = [
    "ApiKey",
    "Base",
    "EscrowAsset",
    "Invoice",
    "MetaTransaction",
    "OwnerSequence",
    "OwnerSettings",
    "ParkedEscrow",
    "RateLimitWindow",
    "Refund",
    "RelayerAccount",
    "RelayerTransaction",
    "UsedRequestTimestamp",
    "WebhookAttempt",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookSecret",
    "Withdrawal",
    "WithdrawalItem",
]
