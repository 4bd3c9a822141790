"""``GET /pay/<paymentAddress>/x402``: the invoice as an x402 v2 resource (``x402Url``), for
programs that pay over HTTP (``gasless.resource``). Public and counted against the client's
rate limit like every ``/pay`` route; a paid GET answers 200 with ``PAYMENT-RESPONSE`` and
the invoice as the payment page's status shows it.

A method's routes belong to the web layer though they live in its folder: this module runs
up to ``web.context``, ``web.page.routes``, ``web.page.view`` and ``web.routedocs``.
"""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from invoicing.errors import (
    ChainUnavailable,
    GaslessUnavailable,
    InvalidRequest,
    NotFound,
    RateLimited,
)
from invoicing.payments.x402.protocol import PAYMENT_SIGNATURE
from invoicing.payments.x402.resource import x402_resource
from invoicing.web.context import services_of
from invoicing.web.page.routes import limit_client
from invoicing.web.page.view import PaymentStatus, parse_payment_address, payment_view
from invoicing.web.routedocs import PUBLIC, Answer, documented

router = APIRouter(prefix="/pay", tags=["payment page"], dependencies=[Depends(limit_client)])

_HEADER_DOC = (
    "`PAYMENT-REQUIRED` (402): base64 of the x402 PaymentRequired; `PAYMENT-RESPONSE`: "
    "base64 of the SettleResponse."
)


@router.get(
    "/{payment_address}/x402",
    **documented(
        "Pay an invoice with x402 v2 (send PAYMENT-SIGNATURE; 402 tells what to sign)",
        sdk="public.x402_requirements",
        ok=PaymentStatus,
        ok_description=f"Paid (or nothing left to pay). {_HEADER_DOC}",
        auth=PUBLIC,
        errors=(InvalidRequest, GaslessUnavailable, NotFound, RateLimited, ChainUnavailable),
        other_responses={
            402: {
                "description": f"Payment required, or the payment was refused. {_HEADER_DOC}",
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
        },
    ),
)
async def x402_invoice(request: Request, payment_address: str) -> Answer[PaymentStatus]:
    services = services_of(request)
    address = parse_payment_address(payment_address)
    answer = await x402_resource(
        services, address, str(request.url), request.headers.get(PAYMENT_SIGNATURE)
    )
    if answer.payment_required is not None:
        # The 402 body is the PaymentRequired object the header carries (x402's own shape).
        unpaid = JSONResponse(answer.payment_required, status_code=402, headers=answer.headers)
        return cast(Answer[PaymentStatus], unpaid)
    view = await payment_view(services.chains, answer.invoice, services.clock.now_ms())
    headers = {**answer.headers, "Cache-Control": "no-store"}
    return Answer(view.public_status(), headers=headers)
