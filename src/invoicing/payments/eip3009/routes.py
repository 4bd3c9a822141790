"""``POST /pay/<paymentAddress>/authorization``: the payment page submits a payer's EIP-3009
transfer authorization and the relayer sends it (``gasless.service``). Public, counted
against the client's rate limit like every ``/pay`` route; the signature is the payer's
only authority, and the service checks everything before it sends anything.

A method's routes belong to the web layer though they live in its folder: this module runs
up to ``web.api.inputs``, ``web.api.responses``, ``web.context``,
``web.page.routes``, ``web.page.view`` and ``web.routedocs``.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from invoicing.chain.eip3009 import Authorization
from invoicing.errors import (
    AuthorizationUsed,
    ChainUnavailable,
    GaslessUnavailable,
    InsufficientBalance,
    InvalidAuthorization,
    InvalidRequest,
    InvoiceNotPayable,
    NotFound,
    PayloadTooLarge,
    RateLimited,
)
from invoicing.payments.eip3009.service import (
    GaslessAccepted,
    PayerAuthorization,
    submit_authorization,
)
from invoicing.web.api.inputs import Address, DecimalString, json_body, validate
from invoicing.web.api.responses import WireModel
from invoicing.web.context import services_of
from invoicing.web.page.routes import limit_client
from invoicing.web.page.view import parse_payment_address
from invoicing.web.routedocs import PUBLIC, AddressOut, Answer, Hex32, TxHash, documented

router = APIRouter(prefix="/pay", tags=["payment page"], dependencies=[Depends(limit_client)])


def _bytes32(value: Any) -> Any:
    if not isinstance(value, str) or len(value) != 66 or not value.startswith("0x"):
        raise ValueError("must be 0x and 64 hex digits")
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        raise ValueError("must be 0x and 64 hex digits") from None


Bytes32 = Annotated[
    bytes,
    BeforeValidator(_bytes32),
    WithJsonSchema({"type": "string", "pattern": "^0x[0-9a-fA-F]{64}$"}),
]


class AuthorizationBody(BaseModel):
    """A payer's EIP-3009 ``TransferWithAuthorization``, signed in the token's EIP-712 domain
    (``chainId``, ``tokenAddress``): the fields as signed, integers as decimal strings."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    chainId: int = Field(gt=0, lt=2**63)
    tokenAddress: Address
    from_: Address = Field(alias="from")
    to: Address
    value: DecimalString
    validAfter: DecimalString
    validBefore: DecimalString
    nonce: Bytes32
    signature: str = Field(max_length=4098)


class GaslessSubmission(WireModel):
    """The transaction that carries a payer's authorization: ``submitted`` while pending,
    then ``confirmed`` or ``failed``; the invoice shows paid once the payment is seen."""

    txHash: TxHash
    chainId: int
    payer: AddressOut
    nonce: Hex32
    status: str

    @classmethod
    def of(cls, accepted: GaslessAccepted) -> Self:
        return cls(
            txHash=accepted.tx_hash,
            chainId=accepted.chain_id,
            payer=accepted.payer,
            nonce=accepted.nonce,
            status=accepted.status,
        )


@router.post(
    "/{payment_address}/authorization",
    **documented(
        "Pay without gas: submit the payer's EIP-3009 transfer authorization",
        sdk="public.pay_without_gas",
        ok=GaslessSubmission,
        status=202,
        body=AuthorizationBody,
        auth=PUBLIC,
        errors=(
            InvalidRequest,
            GaslessUnavailable,
            InvalidAuthorization,
            InsufficientBalance,
            NotFound,
            AuthorizationUsed,
            InvoiceNotPayable,
            PayloadTooLarge,
            RateLimited,
            ChainUnavailable,
        ),
    ),
)
async def submit(request: Request, payment_address: str) -> Answer[GaslessSubmission]:
    services = services_of(request)
    address = parse_payment_address(payment_address)
    body = validate(AuthorizationBody, await json_body(request, services.settings.max_body_bytes))
    authorization = Authorization(
        body.from_, body.to, body.value, body.validAfter, body.validBefore, body.nonce
    )
    submitted = PayerAuthorization(
        address, body.chainId, body.tokenAddress, authorization, body.signature
    )
    accepted = await submit_authorization(services, submitted)
    return Answer(GaslessSubmission.of(accepted), status_code=202)
