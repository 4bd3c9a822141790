"""Manual capture (docs/integration/invoices.md#manual-capture): capture or void a paid
invoice created with ``capture: "manual"`` (``invoices.capture``, ``refunds.service``)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from invoicing.addresses import ZERO_ADDRESS
from invoicing.errors import (
    ChainUnavailable,
    DeadlineExpired,
    InvalidOwnerSignature,
    InvoiceCaptured,
    InvoiceNotPaid,
    InvoiceVoided,
    NonceMismatch,
    NotFound,
    RateLimited,
    SweepInProgress,
    UnsupportedChain,
)
from invoicing.invoices.capture import capture_invoice
from invoicing.refunds.service import submit_refund
from invoicing.web.api.deps import authorized_body
from invoicing.web.api.inputs import Address, DecimalString
from invoicing.web.api.refunds import refund_request
from invoicing.web.api.responses import RefundSubmission, WireModel
from invoicing.web.context import services_of
from invoicing.web.routedocs import (
    BODY_ROUTE_ERRORS,
    AddressOut,
    Answer,
    TimestampMs,
    documented,
)

router = APIRouter(prefix="/integration/invoices", tags=["capture"])


class CaptureBody(BaseModel):
    """Body of POST /integration/invoices/capture."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    paymentAddress: Address


class Captured(WireModel):
    """A captured invoice; a repeated capture gets the same answer."""

    ownerAddress: AddressOut
    chainId: int
    invoiceId: str
    paymentAddress: AddressOut
    capture: Literal["manual"]
    capturedAt: TimestampMs = Field(
        description="When it was captured (by a capture, or at the end of the capture window)."
    )


class VoidBody(BaseModel):
    """Body of POST /integration/invoices/void: an EIP-712 ``Refund`` of the whole payment
    (what the escrow holds of the invoice's token) to ``to``, signed by the owner or the
    owner's refund delegate."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ownerAddress: Address
    chainId: int = Field(gt=0, lt=2**63)
    paymentAddress: Address
    to: Address = Field(
        description="The payer to pay back. For now always given; it will default to the "
        "payer of record once the service records who paid."
    )
    amountRaw: DecimalString = Field(description="What the escrow holds of the invoice's token.")
    nonce: DecimalString
    deadline: DecimalString
    signature: str = Field(max_length=4098)

    @field_validator("to")
    @classmethod
    def _not_zero(cls, value: str) -> str:
        if value == ZERO_ADDRESS:
            raise ValueError("must not be the zero address")
        return value


@router.post(
    "/capture",
    **documented(
        "Capture a paid manual-capture invoice: its escrow is swept from now on",
        ok=Captured,
        body=CaptureBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            NotFound,
            InvoiceNotPaid,
            InvoiceCaptured,
            InvoiceVoided,
        ),
        action="invoice.capture",
        sdk="invoices.capture",
    ),
)
async def capture(request: Request) -> Answer[Captured]:
    body, caller = await authorized_body(request, "invoice.capture", CaptureBody)
    invoice = await capture_invoice(
        services_of(request), caller.owner_key, body.chainId, body.paymentAddress
    )
    assert invoice.captured_at is not None
    captured = Captured(
        ownerAddress=invoice.owner_address,
        chainId=invoice.chain_id,
        invoiceId=invoice.invoice_id,
        paymentAddress=invoice.payment_address,
        capture="manual",
        capturedAt=invoice.captured_at,
    )
    return Answer(captured)


@router.post(
    "/void",
    **documented(
        "Void a paid manual-capture invoice: relay a signed Refund of its whole payment",
        ok=RefundSubmission,
        status=202,
        body=VoidBody,
        errors=(
            *BODY_ROUTE_ERRORS,
            UnsupportedChain,
            DeadlineExpired,
            InvalidOwnerSignature,
            NotFound,
            NonceMismatch,
            SweepInProgress,
            InvoiceNotPaid,
            InvoiceCaptured,
            InvoiceVoided,
            RateLimited,
            ChainUnavailable,
        ),
        action="invoice.void",
        sdk="invoices.void",
    ),
)
async def void(request: Request) -> Answer[RefundSubmission]:
    body, _caller = await authorized_body(request, "invoice.void", VoidBody)
    accepted = await submit_refund(services_of(request), refund_request(body), voids=True)
    return Answer(RefundSubmission.of(accepted), status_code=202)
