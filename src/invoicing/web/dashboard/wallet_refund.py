"""The refund of a completed invoice, paid from the owner's wallet: the sweep emptied the
escrow, so the signed escrow refund cannot work any more (docs/integration/refunds.md).

*Prepare* answers the transaction for the wallet to send: a plain transfer of the native
coin, or the token's ``transfer``, from the owner to the recipient (by default the first
payer of record). The wallet signs, sends and pays for it; once it is mined the page posts
its hash, and ``refunds.wallet.record_wallet_refund`` checks it on chain and records it with
its ``invoice.refunded`` event. The session only says who asks; the chain decides.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import ERC20
from invoicing.errors import Conflict, InvalidRequest
from invoicing.invoices.amounts import to_raw
from invoicing.invoices.history import invoice_history
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.refunds.wallet import WalletRefundClaim, record_wallet_refund
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import json_answer
from invoicing.web.dashboard.session import SignedIn
from invoicing.web.dashboard.signed import read_address, read_json, read_text, read_uint

router = APIRouter(prefix="/dashboard", include_in_schema=False)


@router.post("/invoices/{invoice_pk}/wallet-refund/prepare")
async def prepare_wallet_refund(request: Request, invoice_pk: str, owner: SignedIn) -> JSONResponse:
    """The transaction the wallet sends (hex quantities, as EIP-1193 wallets take them)."""
    services = services_of(request)
    invoice = (await invoice_history(services.db, owner.key, invoice_pk)).invoice
    if invoice.status != InvoiceStatus.COMPLETED:
        raise Conflict(
            "only a completed invoice is refunded from the wallet", {"status": invoice.status}
        )
    data = await read_json(request)
    to = read_address(data, "to")
    try:
        amount_raw = to_raw(read_text(data, "amount"), invoice.decimals)
    except ValueError as exc:
        raise InvalidRequest(f"amount: {exc}", {"field": "amount"}) from None
    if amount_raw <= 0:
        raise InvalidRequest("amount: must be positive", {"field": "amount"})
    if invoice.token_address is None:
        tx = {"from": owner.address, "to": to, "value": hex(amount_raw)}
    else:
        calldata = encode_call(ERC20, "transfer", to, amount_raw)
        tx = {"from": owner.address, "to": invoice.token_address, "data": "0x" + calldata.hex()}
    submit = {"to": to, "amountRaw": str(amount_raw)}
    return json_answer(
        {"owner": owner.address, "chainId": invoice.chain_id, "tx": tx, "submit": submit}
    )


@router.post("/invoices/{invoice_pk}/wallet-refund")
async def wallet_refund(request: Request, invoice_pk: str, owner: SignedIn) -> JSONResponse:
    """Record the owner's mined refund transaction once the chain shows it."""
    services = services_of(request)
    data = await read_json(request)
    claim = WalletRefundClaim(
        owner_address=owner.address,
        invoice_id=invoice_pk[:36],
        tx_hash=read_text(data, "txHash", 66),
        to_address=read_address(data, "to"),
        amount_raw=read_uint(data, "amountRaw"),
    )
    refund = await record_wallet_refund(services, claim)
    return json_answer(
        {"message": f"Refund recorded: transaction {refund.tx_hash}", "txHash": refund.tx_hash},
        status_code=201,
    )
