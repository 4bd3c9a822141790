"""Gasless refunds: ``POST /integration/invoices/refund-meta`` relays an EIP-712 ``Refund``
from an invoice's escrow, signed by the owner or the owner's refund delegate
(``refunds.service``); ``POST /integration/refund-delegate`` relays the owner-signed
``SetRefundDelegate`` that names that delegate (``fees.delegate``)."""

from __future__ import annotations

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
    NotFound,
    RateLimited,
    SweepInProgress,
    UnsupportedChain,
    UnsupportedToken,
)
from invoicing.fees.delegate import DelegateRequest, submit_refund_delegate
from invoicing.refunds.service import RefundRequest, submit_refund
from invoicing.web.api.deps import authorized_body
from invoicing.web.api.inputs import Address, DecimalString
from invoicing.web.api.responses import FeeSubmission, RefundSubmission
from invoicing.web.context import services_of
from invoicing.web.routedocs import BODY_ROUTE_ERRORS, Answer, documented

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
    refund = RefundRequest(
        owner_address=body.ownerAddress,
        chain_id=body.chainId,
        payment_address=body.paymentAddress,
        to_address=body.to,
        amount_raw=body.amountRaw,
        token_address=body.tokenAddress,
        token_given="tokenAddress" in body.model_fields_set,
        nonce=body.nonce,
        deadline=body.deadline,
        signature=body.signature,
    )
    accepted = await submit_refund(services_of(request), refund)
    return Answer(RefundSubmission.of(accepted), status_code=202)


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
