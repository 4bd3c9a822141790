"""Refunds after the sweep: a completed invoice's escrow is empty, so a refund from it cannot
work; the owner pays the refund from their own wallet instead (the dashboard proposes the
transfer to the wallet, which signs and pays for it) and the service records it once it has
checked the transaction on chain (docs/integration/refunds.md#after-the-sweep).

The checks, in order, and nothing is written when one fails: the invoice is the owner's (404)
and completed (409 ``conflict``: before the sweep the escrow refund applies); the transaction
was not recorded before (409 ``conflict``); it is mined (409 ``conflict`` until it is: post
again); it succeeded, was sent by the owner, and moved ``amountRaw`` of the invoice's asset to
``to`` (400 ``invalid_request``, ``details.reason`` says which check failed): for the native
coin its own value and recipient, for a token a ``Transfer`` log of that token from the
owner to ``to`` of that amount. A recorded refund emits ``invoice.refunded`` as an escrow
refund does, with the same refund object (``status`` ``confirmed``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from invoicing.addresses import normalize_address
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.transfers import Transfer, parse_transfer_log
from invoicing.errors import Conflict, InvalidRequest, NotFound
from invoicing.invoices.lifecycle import InvoiceEvent, InvoiceStatus
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.owner_view import wallet_refund_view
from invoicing.refunds.claims import approve_in
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import WalletRefund

TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class WalletRefundClaim:
    """What the dashboard posts: the owner's transaction and what it should have moved."""

    owner_address: str  # checksummed
    invoice_id: str  # the record id (``Invoice.id``)
    tx_hash: str
    to_address: str  # checksummed
    amount_raw: int


async def record_wallet_refund(services: Services, claim: WalletRefundClaim) -> WalletRefund:
    """Check ``claim`` on chain and record it with its ``invoice.refunded`` event."""
    if not TX_HASH.fullmatch(claim.tx_hash):
        raise InvalidRequest("txHash must be 0x and 64 hex digits", {"field": "txHash"})
    if claim.amount_raw <= 0:
        raise InvalidRequest("amountRaw must be more than 0", {"field": "amountRaw"})
    tx_hash = claim.tx_hash.lower()
    invoice = await _completed_invoice(services, claim)
    chain = services.chains.get(invoice.chain_id)
    block = await _verified_block(chain, claim, tx_hash, invoice.token_address)
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        if await session.get(WalletRefund, tx_hash) is not None:
            raise Conflict("this transaction is already recorded as a refund")
        row = await session.scalar(
            select(Invoice).where(Invoice.id == invoice.id).with_for_update()
        )
        assert row is not None
        refund = WalletRefund(
            tx_hash=tx_hash,
            invoice_id=invoice.id,
            from_address=claim.owner_address,
            to_address=claim.to_address,
            token_address=invoice.token_address,
            amount_raw=str(claim.amount_raw),
            block_number=block,
            created_at=now_ms,
        )
        session.add(refund)
        await approve_in(session, invoice.id, claim.to_address, now_ms)
        await session.execute(update(Invoice).where(Invoice.id == row.id).values(has_extras=True))
        await session.flush()
        row.has_extras = True
        extra = {"refund": wallet_refund_view(refund)}
        occurrence = Occurrence(row, [InvoiceEvent.REFUNDED], extra=extra)
        await record_events(session, services.settings, now_ms, [occurrence])
    return refund


async def _completed_invoice(services: Services, claim: WalletRefundClaim) -> Invoice:
    async with services.db.sessions() as session:
        invoice = await session.get(Invoice, claim.invoice_id)
    if invoice is None or invoice.owner_key != claim.owner_address.lower():
        raise NotFound("no such invoice for this owner")
    if invoice.status != InvoiceStatus.COMPLETED:
        raise Conflict(
            "only a completed (swept) invoice is refunded from the wallet; before the sweep "
            "refund from the escrow",
            {"status": invoice.status},
        )
    return invoice


async def _verified_block(
    chain: ChainGateway, claim: WalletRefundClaim, tx_hash: str, token: str | None
) -> int:
    """The block of the owner's transaction once it is shown to move the claimed amount."""
    tx = await chain.transaction(tx_hash)
    receipt = await chain.receipt(tx_hash) if tx is not None else None
    if tx is None or receipt is None:
        raise Conflict("this transaction is not mined yet: post it again once it is")

    def refuse(reason: str) -> InvalidRequest:
        return InvalidRequest("the transaction is not this refund", {"reason": reason})

    if receipt.get("status") != 1:
        raise refuse("reverted")
    if _address(tx.get("from")) != claim.owner_address:
        raise refuse("not_from_owner")
    if token is None:
        if _address(tx.get("to")) != claim.to_address:
            raise refuse("wrong_recipient")
        if _int(tx.get("value")) != claim.amount_raw:
            raise refuse("wrong_amount")
    elif not _moves(receipt, normalize_address(token), claim):
        raise refuse("no_matching_transfer")
    return int(receipt["blockNumber"])


def _moves(receipt: dict[str, Any], token: str, claim: WalletRefundClaim) -> bool:
    """Whether ``receipt`` holds a ``Transfer`` of ``token`` from the owner to the recipient
    of exactly the amount."""
    for log in receipt.get("logs") or []:
        if not isinstance(log, dict) or _address(log.get("address")) != token:
            continue
        transfer: Transfer | None = parse_transfer_log(log, {claim.to_address})
        if transfer is not None and transfer.sender == claim.owner_address:
            if transfer.amount_raw == claim.amount_raw:
                return True
    return False


def _address(value: Any) -> str | None:
    try:
        return normalize_address(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    try:
        return int(value, 16) if isinstance(value, str) else None
    except ValueError:
        return None
