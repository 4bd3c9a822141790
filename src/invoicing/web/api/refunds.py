"""Gasless refunds: ``POST /integration/invoices/refund-meta`` relays an EIP-712 ``Refund``
from an invoice's escrow, signed by the owner or the owner's refund delegate
(``refunds.service``); ``POST /integration/refund-delegate`` relays the owner-signed
``SetRefundDelegate`` that names that delegate (``fees.delegate``);
``POST /integration/invoices/refund`` has the service sign the Refund itself as the owner's
delegate, to the payer of record (``refunds.delegated``). ``refund_request`` builds the
refund of every body that carries a signed ``Refund`` (this one and the void's)."""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter, Request
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

from invoicing.addresses import ZERO_ADDRESS
from invoicing.errors import (
    ChainUnavailable,
    DeadlineExpired,
    InsufficientBalance,
    InvalidOwnerSignature,
    InvoicePending,
    NonceMismatch,
    NoPayerOfRecord,
    NotFound,
    RateLimited,
    RefundDelegateNotNamed,
    SweepInProgress,
    UnsupportedChain,
    UnsupportedToken,
)
from invoicing.fees.delegate import DelegateRequest, submit_refund_delegate
from invoicing.refunds.delegated import ServiceRefund, refund_by_service
from invoicing.refunds.service import RefundRequest, submit_refund
from invoicing.web.api.deps import authorized_body
from invoicing.web.api.inputs import Address, DecimalString
from invoicing.web.api.responses import FeeSubmission, RefundSubmission
from invoicing.web.context import services_of
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, AddressOut, Answer, Uint256String, documented

router = APIRouter(tags=["refunds"])


class RefundBody(BaseModel):
    """Body of POST /integration/invoices/refund-meta. ``tokenAddress`` left out: the
    invoice's token; ``null``: native coin."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    paymentAddress: Address
    to: Address
    amountRaw: DecimalString
    tokenAddress: Address | None = None
    nonce: DecimalString
    deadline: DecimalString
    signature: str = Field(max_length=4098)

    @field_validator("to")
    @classmethod
    def _not_zero(cls, value: str) -> str:
        if value == ZERO_ADDRESS:
            raise ValueError("must not be the zero address")
        return value

    @field_validator("amountRaw")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("must be positive")
        return value


@router.post(
    "/integration/invoices/refund-meta",
    **documented(
        "Relay an owner-signed Refund from an invoice's escrow",
        ok=RefundSubmission,
        status=202,
        body=RefundBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            UnsupportedChain,
            UnsupportedToken,
            DeadlineExpired,
            InvalidOwnerSignature,
            InsufficientBalance,
            NotFound,
            NonceMismatch,
            SweepInProgress,
            InvoicePending,
            ChainUnavailable,
        ),
        action="invoice.refund",
        sdk="invoices.refund",
    ),
)
async def refund_meta(request: Request) -> Answer[RefundSubmission]:
    body, _caller = await authorized_body(request, "invoice.refund", RefundBody)
    accepted = await submit_refund(services_of(request), refund_request(body))
    return Answer(RefundSubmission.of(accepted), status_code=202)


class SignedRefundBody(Protocol):
    """What a body carrying a signed ``Refund`` holds (refund-meta's, the void's)."""

    ownerAddress: str
    chainId: int
    paymentAddress: str
    to: str
    amountRaw: int
    nonce: int
    deadline: int
    signature: str

    @property
    def model_fields_set(self) -> set[str]: ...


def refund_request(body: SignedRefundBody) -> RefundRequest:
    """The refund a body asks for; a body without ``tokenAddress`` means the invoice's token."""
    token_given = "tokenAddress" in body.model_fields_set
    return RefundRequest(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        payment_address=body.paymentAddress,
        to_address=body.to,
        amount_raw=body.amountRaw,
        token_address=getattr(body, "tokenAddress", None) if token_given else None,
        token_given=token_given,
        nonce=body.nonce,
        deadline=body.deadline,
        signature=body.signature,
    )


class ServiceRefundBody(BaseModel):
    """Body of POST /integration/invoices/refund: exactly one of ``amount`` and
    ``amountRaw``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    paymentAddress: Address
    amount: str | None = Field(
        default=None,
        max_length=40,
        description="A decimal string in the invoice's price: its `currency` when it was "
        "priced in one (a share of the price refunds that share of what it locked, rounded "
        "down), else its token.",
    )
    amountRaw: DecimalString | None = None

    @field_validator("amountRaw")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError("must be positive")
        return value


class ServiceRefundSubmission(RefundSubmission):
    """A Refund the service signed as the owner's delegate and relayed."""

    to: AddressOut = Field(description="The payer of record, whom the refund pays.")
    amountRaw: Uint256String


@router.post(
    "/integration/invoices/refund",
    **documented(
        "Refund the payer of record, signed by the service as the owner's refund delegate",
        ok=ServiceRefundSubmission,
        status=202,
        body=ServiceRefundBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            UnsupportedChain,
            NotFound,
            RefundDelegateNotNamed,
            NoPayerOfRecord,
            InsufficientBalance,
            NonceMismatch,
            SweepInProgress,
            InvoicePending,
            RateLimited,
            ChainUnavailable,
        ),
        action="invoice.service_refund",
        sdk="invoices.service_refund",
    ),
)
async def service_refund(request: Request) -> Answer[ServiceRefundSubmission]:
    body, _caller = await authorized_body(request, "invoice.service_refund", ServiceRefundBody)
    asked = ServiceRefund(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        payment_address=body.paymentAddress,
        amount_raw=body.amountRaw,
        amount=body.amount,
    )
    signed = await refund_by_service(services_of(request), asked)
    submission = RefundSubmission.of(signed.accepted)
    answer = ServiceRefundSubmission(
        **submission.model_dump(), to=signed.to_address, amountRaw=str(signed.amount_raw)
    )
    return Answer(answer, status_code=202)


class RefundDelegateBody(BaseModel):
    """Body of POST /integration/refund-delegate: the owner's EIP-712 ``SetRefundDelegate``
    (``delegate`` = the zero address revokes)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    delegate: Address = Field(
        description="The address whose Refund signatures count as the owner's; the zero "
        "address revokes."
    )
    nonce: DecimalString
    deadline: DecimalString
    signature: str = Field(max_length=4098)


@router.post(
    "/integration/refund-delegate",
    **documented(
        "Relay an owner-signed SetRefundDelegate (name or revoke the refund delegate)",
        ok=FeeSubmission,
        status=202,
        body=RefundDelegateBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            UnsupportedChain,
            DeadlineExpired,
            InvalidOwnerSignature,
            NonceMismatch,
            RateLimited,
            ChainUnavailable,
        ),
        action="refund_delegate.set",
        sdk="fees.set_refund_delegate",
    ),
)
async def set_refund_delegate(request: Request) -> Answer[FeeSubmission]:
    body, _caller = await authorized_body(request, "refund_delegate.set", RefundDelegateBody)
    delegate = DelegateRequest(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        delegate=body.delegate,
        nonce=body.nonce,
        deadline=body.deadline,
        signature=body.signature,
    )
    accepted = await submit_refund_delegate(services_of(request), delegate)
    return Answer(FeeSubmission.of(accepted), status_code=202)
