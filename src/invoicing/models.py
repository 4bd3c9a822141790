"""Imports every table so ``Base.metadata`` is complete (Alembic and tests use it)."""

from invoicing.db import Base
from invoicing.payments.eip3009.models import GaslessPayment
from invoicing.payments.subscriptions.models import Subscription, SubscriptionCharge
from invoicing.tables.auth import (
    ApiKey,
    DashboardSession,
    SignInTicket,
    TeamMember,
    UsedRequestTimestamp,
)
from invoicing.tables.brand import OwnerBrand
from invoicing.tables.invoices import Invoice, OwnerSequence
from invoicing.tables.mail import MailMessage, OwnerMail, ReceiptRequest
from invoicing.tables.monitor import MonitorShard, MonitorWorker
from invoicing.tables.notifications import (
    EndpointHealth,
    Event,
    EventEndpoint,
    OwnerSettings,
    WebhookAttempt,
    WebhookEvent,
    WebhookSecret,
)
from invoicing.tables.ratelimit import RateLimitWindow
from invoicing.tables.rates import PaidRate
from invoicing.tables.records import PaymentRecord, PaymentScan
from invoicing.tables.refunds import Refund, WalletRefund
from invoicing.tables.relay import GaslessOptIn, RelayedAuthorization
from invoicing.tables.settlement import (
    EscrowAsset,
    MetaTransaction,
    ParkedEscrow,
    RelayerAccount,
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
)

__all__ = [
    "ApiKey",
    "Base",
    "DashboardSession",
    "EndpointHealth",
    "EscrowAsset",
    "Event",
    "EventEndpoint",
    "GaslessOptIn",
    "GaslessPayment",
    "Invoice",
    "MailMessage",
    "MonitorShard",
    "MonitorWorker",
    "MetaTransaction",
    "OwnerBrand",
    "OwnerMail",
    "OwnerSequence",
    "OwnerSettings",
    "PaidRate",
    "ParkedEscrow",
    "PaymentRecord",
    "PaymentScan",
    "RateLimitWindow",
    "ReceiptRequest",
    "Refund",
    "RelayedAuthorization",
    "SignInTicket",
    "Subscription",
    "SubscriptionCharge",
    "RelayerAccount",
    "RelayerTransaction",
    "TeamMember",
    "UsedRequestTimestamp",
    "WalletRefund",
    "WebhookAttempt",
    "WebhookEvent",
    "WebhookSecret",
    "Withdrawal",
    "WithdrawalItem",
]
