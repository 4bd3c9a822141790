"""The response models: each documents its routes' 2xx body in ``openapi.json``
(``documented(ok=...)``) and is what writes it (``Answer``, web/routedocs.py), so each resource
has one wire shape. The domain hands over typed values (rows, records); ``of`` builds a model
from one. Two bodies are also what the domain sends elsewhere, so the domain builds them and
the model checks and writes them: the Invoice object (``invoices.views``, also every event's
``data.invoice``) and the event envelope (also the body of a delivery). ``extra="forbid"``:
an undocumented field is refused rather than sent. The notifications' models (events,
endpoints, the paid-webhook log, signing secrets and settings) are in ``event_responses.py``.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from invoicing.fees.service import OwnerFees
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.settlement.signed_relay import Accepted
from invoicing.web.routedocs import (
    AddressOut,
    DecimalAmount,
    Hex32,
    RawAmount,
    TimestampMs,
    TxHash,
    Uint256String,
)


class WireModel(BaseModel):
    """A response model: what is not declared is refused, never sent."""

    model_config = ConfigDict(extra="forbid")


class Refund(WireModel):
    """A relayed refund from the invoice's escrow."""

    txHash: TxHash | None
    to: AddressOut
    tokenAddress: AddressOut | None = Field(description="null: the native coin.")
    amountRaw: RawAmount
    status: str = Field(description="submitted, confirmed or failed.")
    createdAt: TimestampMs


class Payment(WireModel):
    """A transfer into the invoice's escrow, as the chain shows it (docs: Invoices)."""

    # ``from`` is a Python keyword: the field is ``from_``, read and written as ``from``.
    model_config = ConfigDict(extra="forbid", validate_by_name=True, serialize_by_alias=True)

    txHash: TxHash
    from_: AddressOut = Field(alias="from")
    amountRaw: RawAmount
    tokenAddress: AddressOut | None = Field(description="null: the native coin.")
    blockNumber: int


class OtherBalance(WireModel):
    """An asset in the escrow other than the invoice's own, not swept yet."""

    tokenAddress: AddressOut | None = Field(description="null: the native coin.")
    balanceRaw: RawAmount


class FiatPrice(WireModel):
    """The fiat price locked into the invoice at creation (docs: Pricing)."""

    currency: str = Field(description="ISO 4217.")
    amount: DecimalAmount = Field(description="The price, in the currency.")
    rate: DecimalAmount = Field(
        description="Units of the currency one whole unit of the asset was worth."
    )
    source: Literal["peg", "chainlink"] = Field(
        description="peg: a token its issuer redeems 1:1 for the currency; chainlink: a feed."
    )
    feed: AddressOut | None = Field(default=None, description="chainlink: the aggregator.")
    roundId: Uint256String | None = Field(default=None, description="chainlink: its round.")
    roundUpdatedAt: TimestampMs | None = Field(
        default=None, description="chainlink: when that round was updated."
    )


class Tolerance(WireModel):
    """The owner's underpayment tolerance when the invoice was created (docs: Pricing)."""

    bps: int = Field(ge=1, le=500, description="Basis points of requiredRaw.")
    minimumRaw: RawAmount = Field(description="The least balance that pays the invoice.")
    acceptedUnder: bool = Field(description="Paid with less than requiredRaw.")
    shortfallRaw: RawAmount = Field(description="requiredRaw less the balance it was paid with.")


class InvoiceSubscription(WireModel):
    id: str = Field(description="The subscription's id.")
    period: int = Field(ge=0, description="The period this invoice charges, from 0.")


class Invoice(WireModel):
    """The Invoice object, plus the escrow's ``salt`` and, when there are some,
    its ``refunds``, ``otherBalances``, fiat price and tolerance."""

    id: str
    ownerAddress: AddressOut
    chainId: int
    invoiceId: str
    paymentAddress: AddressOut
    salt: Hex32
    amount: DecimalAmount
    tokenAddress: AddressOut | None = Field(description="null: the chain's native coin.")
    description: str | None = Field(default=None, description="Present only when given.")
    metadata: dict[str, Any] | None = Field(default=None, description="Present only when given.")
    subscription: InvoiceSubscription | None = Field(
        default=None,
        description="Present only on a subscription's charge: its subscription and period.",
    )
    redirectUrl: str | None = Field(
        default=None,
        description="Where the payment page sends the payer after payment (when given).",
    )
    cancelUrl: str | None = Field(
        default=None,
        description="The way back to the shop without paying (when given).",
    )
    expiresAt: TimestampMs
    status: InvoiceStatus
    paid: bool
    paidAt: TimestampMs | None
    withdrawn: bool
    withdrawnAt: TimestampMs | None
    requiredRaw: RawAmount
    balanceRaw: RawAmount
    metaBalance: DecimalAmount
    lastCheckedAt: TimestampMs
    createdAt: TimestampMs
    updatedAt: TimestampMs
    url: str = Field(description="The hosted payment page.")
    x402Url: str | None = Field(
        default=None,
        description="The invoice's x402 v2 resource; present only for an invoice in a token "
        "with EIP-3009.",
    )
    capture: Literal["automatic", "manual"] = Field(
        description="automatic: swept once paid; manual: the paid funds wait in the escrow "
        "for a capture or a void (docs: Invoices, manual capture)."
    )
    capturedAt: TimestampMs | None = Field(
        default=None, description="Present only for manual capture; null until captured."
    )
    voidedAt: TimestampMs | None = Field(
        default=None,
        description="Present only for manual capture; null unless voided (the payment went "
        "back to the payer and the invoice is cancelled).",
    )
    fiat: FiatPrice | None = Field(
        default=None, description="Present only for an invoice created with a currency."
    )
    tolerance: Tolerance | None = Field(
        default=None, description="Present only when the owner accepted an underpayment."
    )
    payments: list[Payment] | None = Field(
        default=None,
        description="The transfers into the escrow (payments of record); present only when any.",
    )
    refunds: list[Refund] | None = Field(default=None, description="Present only when any.")
    otherBalances: list[OtherBalance] | None = Field(
        default=None, description="Present only when any."
    )


class InvoiceStatusResult(WireModel):
    invoice: Invoice


class InvoiceList(WireModel):
    """A page of invoices; everything is read when page * limit >= total."""

    items: list[Invoice]
    total: int = Field(ge=0)
    page: int = Field(ge=1)
    limit: int = Field(ge=1, le=100)


class DeleteResult(WireModel):
    """Also the answer to a repeated DELETE of the same invoice."""

    deleted: Literal[True]
    invoiceId: str
    chainId: int


class IssuedApiKey(WireModel):
    """A new API key; ``apiKey`` is shown this once."""

    id: str
    apiKey: str
    label: str | None
    createdAt: TimestampMs


class ApiKey(WireModel):
    id: str
    label: str | None
    createdAt: TimestampMs
    revokedAt: TimestampMs | None


class ApiKeyList(WireModel):
    items: list[ApiKey]


class RevokedApiKey(WireModel):
    revoked: Literal[True]
    id: str
    revokedAt: TimestampMs


class FeeSettings(WireModel):
    """An owner's settings as the factory holds them."""

    feeBps: int = Field(ge=0, le=500)
    payoutAddress: AddressOut | None
    nonce: Uint256String
    factory: AddressOut = Field(
        description="The factory contract SetFee and SetPayout signatures are made for "
        "(the EIP-712 domain's verifyingContract)."
    )

    @classmethod
    def of(cls, fees: OwnerFees) -> Self:
        return cls(
            feeBps=fees.fee_bps,
            payoutAddress=fees.payout_address,
            nonce=str(fees.nonce),
            factory=fees.factory,
        )


class FeeSubmission(WireModel):
    """A relayed SetFee or SetPayout: the transaction that carries it."""

    txHash: TxHash
    chainId: int
    ownerAddress: AddressOut
    nonce: Uint256String
    status: Literal["submitted"]

    @classmethod
    def of(cls, accepted: Accepted) -> Self:
        return cls(
            txHash=accepted.tx_hash,
            chainId=accepted.chain_id,
            ownerAddress=accepted.signer_address,
            nonce=str(accepted.nonce),
            status="submitted",
        )


class RefundSubmission(FeeSubmission):
    """A relayed Refund: the transaction that carries it."""


class EscrowExportLine(WireModel):
    """One line of the escrow export (NDJSON)."""

    paymentAddress: AddressOut
    salt: Hex32
    tokenAddress: AddressOut | None
    invoiceId: str
    status: InvoiceStatus
    chainId: int
    factory: AddressOut = Field(
        description="The factory that made the escrow and sweeps it: the chain's current "
        "one, or a previous version's for an escrow made before an upgrade."
    )


class Health(WireModel):
    status: Literal["ok"]


class Readiness(WireModel):
    """200 when every check passes (a relayer short of funds is ``degraded``), else 503."""

    ready: bool
    checks: dict[str, str]
    degraded: dict[str, str] | None = Field(default=None, description="Present only when any.")
