"""Imports every table so ``Base.metadata`` is complete (Alembic and tests use it)."""

from invoicing.auth.models import (
    ApiKey,
    DashboardSession,
    SignInTicket,
    TeamMember,
    UsedRequestTimestamp,
)
from invoicing.brand.models import OwnerBrand
from invoicing.db import Base
from invoicing.invoices.coverage import MonitorShard, MonitorWorker
from invoicing.invoices.fiat import PaidRate
from invoicing.invoices.models import Invoice, OwnerSequence
from invoicing.invoices.payments import PaymentRecord, PaymentScan
from invoicing.notifications.mail.models import MailMessage, OwnerMail, ReceiptRequest
from invoicing.notifications.models import (
    EndpointHealth,
    Event,
    EventEndpoint,
    OwnerSettings,
    WebhookAttempt,
    WebhookEvent,
    WebhookSecret,
)
from invoicing.payments.eip3009.models import GaslessPayment
from invoicing.payments.models import GaslessOptIn, RelayedAuthorization
from invoicing.payments.subscriptions.models import Subscription, SubscriptionCharge
from invoicing.ratelimit import RateLimitWindow
from invoicing.refunds.models import Refund, WalletRefund
from invoicing.settlement.models import (
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
