"""An invoice as an x402 resource (``x402Url``): what a GET without payment is told to pay,
and a GET with ``PAYMENT-SIGNATURE`` verified and settled through the relayer
(``gasless.x402`` for the protocol, ``gasless.service`` for the checks and the relay).

The answer to a paid request waits for the settling transaction's receipt (at most
``x402_settle_wait_s``, 15 s by default; a client that asks again later gets the invoice
once it shows paid), then re-checks the invoice live, so the client gets it back paid. For
that re-check the module runs up to ``monitor.check`` (a unit of its own floor), the one home
of the live re-check."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from invoicing.chain.gateway import ChainGateway
from invoicing.errors import ChainUnavailable, ServiceError
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.service import invoice_at
from invoicing.monitor.check import recheck_invoice
from invoicing.payments.eip3009.service import (
    PayerAuthorization,
    gasless_token,
    submit_authorization,
)
from invoicing.payments.x402.protocol import (
    PAYMENT_REQUIRED,
    PAYMENT_RESPONSE,
    Requirements,
    check_accepted,
    decode_header,
    encode_header,
    parse_payment,
    payment_required,
    reason_of,
    requirements_for,
)
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow

_POLL_S = 0.25


@dataclass(frozen=True)
class X402Answer:
    """The HTTP answer: 200 with the invoice, or 402 with what to pay (and why not)."""

    status_code: int
    headers: dict[str, str]
    invoice: Invoice | InvoiceRow
    payment_required: dict[str, Any] | None = None


async def x402_resource(
    services: Services, payment_address: str, url: str, signature_header: str | None
) -> X402Answer:
    """Answer a GET of the invoice's x402 resource (``signature_header``: the request's
    ``PAYMENT-SIGNATURE``, or None)."""
    invoice = await invoice_at(services.db, payment_address)
    chain = services.chains.get(invoice.chain_id)
    token = await gasless_token(services, chain, invoice)
    (balance,) = await chain.balances(invoice.token_address, [invoice.payment_address])
    if balance is None:
        raise ChainUnavailable("the escrow's balance could not be read; try again")
    due = int(invoice.required_raw) - balance
    if invoice.status != InvoiceStatus.PENDING or due <= 0:
        fresh = await recheck_invoice(services, invoice)
        return X402Answer(200, {}, fresh)
    requirements = requirements_for(invoice.chain_id, token, invoice.payment_address, due)
    description = f"Invoice {invoice.invoice_id}"
    if signature_header is None:
        required = payment_required(
            requirements, url, description, "PAYMENT-SIGNATURE header is required"
        )
        return _unpaid(invoice, required)
    payer = ""
    try:
        payment = parse_payment(decode_header(signature_header))
        payer = payment.authorization.from_address
        check_accepted(payment, requirements)
        accepted = await submit_authorization(
            services,
            PayerAuthorization(
                invoice.payment_address,
                payment.accepted.chain_id,
                payment.accepted.asset,
                payment.authorization,
                payment.signature,
            ),
        )
    except ServiceError as exc:
        if exc.status >= 500 or exc.status in (404, 429):
            raise
        failure = settle_response(False, requirements, payer, "", reason_of(exc))
        required = payment_required(requirements, url, description, exc.message)
        return _unpaid(invoice, required, failure)
    mined = await receipt_status(chain, accepted.tx_hash, services.settings.x402_settle_wait_s)
    response = settle_response(mined, requirements, payer, accepted.tx_hash if mined else "")
    if not mined:
        response["errorReason"] = "invalid_transaction_state"
        required = payment_required(requirements, url, description, "not settled in time")
        return _unpaid(invoice, required, response)
    fresh = await recheck_invoice(services, invoice)
    return X402Answer(200, {PAYMENT_RESPONSE: encode_header(response)}, fresh)


def _unpaid(
    invoice: Invoice, required: dict[str, Any], failure: dict[str, Any] | None = None
) -> X402Answer:
    headers = {PAYMENT_REQUIRED: encode_header(required)}
    if failure is not None:
        headers[PAYMENT_RESPONSE] = encode_header(failure)
    return X402Answer(402, headers, invoice, required)


def settle_response(
    success: bool,
    requirements: Requirements,
    payer: str,
    transaction: str,
    reason: str | None = None,
) -> dict[str, Any]:
    """A ``SettleResponse``: ``transaction`` is empty when nothing was settled."""
    body: dict[str, Any] = {"success": success}
    if reason is not None:
        body["errorReason"] = reason
    body.update(transaction=transaction, network=requirements.network, payer=payer)
    return body


async def receipt_status(chain: ChainGateway, tx_hash: str, wait_s: float) -> bool:
    """Whether the transaction was mined with status 1 within ``wait_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while loop.time() < deadline:
        try:
            receipt = await chain.receipt(tx_hash)
        except ChainUnavailable:
            receipt = None
        if receipt is not None:
            return bool(receipt.get("status") == 1)
        await asyncio.sleep(_POLL_S)
    return False
