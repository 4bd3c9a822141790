"""Gasless refunds: check an owner-signed EIP-712 ``Refund`` of an invoice's escrow, relay it,
follow it to the end.

Checks run in a fixed order and nothing reaches the chain when one fails: the invoice is the
owner's on that chain (404), the token is allow-listed, the deadline is in the future, the
signature recovers to the owner (an EIP-1271 wallet is asked by the capped simulation),
the nonce is the factory's ``nonces(owner)``, no sweep of the escrow is pending, and the
escrow holds at least the amount (read live; unreadable → 503). Then
``settlement.meta.relay_meta`` applies the relayer's spend rules (gas cap, one pending per
nonce, daily budget) and, under the relayer account lock that every withdrawal claim takes
too, the refund row is written after a last look for a pending sweep: a refund and a sweep of
one escrow are never both pending.

A confirmed refund leaves the invoice's status alone, with one exception that is a sweep in
all but name: the factory pays the rest of a native refund to the owner (``Withdrawn``
event), which completes a paid native invoice as a withdrawal would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.calldata import encode_refund_meta
from invoicing.chain.eip712 import refund_typed_data
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.chain.rpc import ContractRevert
from invoicing.db import Database
from invoicing.errors import (
    ChainUnavailable,
    DeadlineExpired,
    InsufficientBalance,
    InvalidOwnerSignature,
    InvalidRequest,
    NonceMismatch,
    NotFound,
    SweepInProgress,
    UnsupportedToken,
)
from invoicing.fees.service import normalize_deadline, parse_signature, recover_signer
from invoicing.invoices.lifecycle import InvoiceEvent, apply_step, on_withdrawal_confirmed
from invoicing.invoices.models import Invoice
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.owner_view import refund_view
from invoicing.invoices.service import find_by_payment_address
from invoicing.refunds.models import Refund, RefundStatus
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.meta import MetaCall, pending_duplicate, relay_meta
from invoicing.settlement.models import (
    RelayerTransaction,
    TxPurpose,
    TxStatus,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)
from invoicing.settlement.parking import unpark
from invoicing.settlement.relayer import Call
from invoicing.settlement.withdrawals import swept_by_event


@dataclass(frozen=True)
class RefundRequest:
    """A validated refund-meta body (addresses checksummed). ``token_given`` False: the
    body left ``tokenAddress`` out, so the invoice's token is meant (None there = native)."""

    owner_address: str
    chain_id: int
    payment_address: str
    to_address: str
    amount_raw: int
    token_address: str | None
    token_given: bool
    nonce: int
    deadline: int  # as sent; normalized by ``fees.service.normalize_deadline``
    signature: str


@dataclass(frozen=True)
class _Checked:
    invoice: Invoice
    token: str | None
    meta: MetaCall


async def submit_refund(services: Services, request: RefundRequest) -> dict[str, Any]:
    """Check and relay a Refund; returns the 202 body. Nothing is sent when a check fails."""
    chain = services.chains.get(request.chain_id)
    invoice = await _owners_invoice(services.db, request)
    factory = normalize_address(chain.config.factory)
    if request.to_address in (ZERO_ADDRESS, factory, invoice.payment_address):
        raise InvalidRequest(
            "to must not be the zero address, the factory or the escrow", {"field": "to"}
        )
    token = request.token_address if request.token_given else invoice.token_address
    if token is not None and chain.config.token(token) is None:
        raise UnsupportedToken(
            "tokenAddress is not on this chain's allow-list", {"tokenAddress": token}
        )
    checked = _Checked(invoice, token, await _signed_call(services, chain, request, invoice, token))
    expected = await chain.factory_nonce(request.owner_address)
    if request.nonce != expected:
        # Ours may be mined already and not final yet: the same request gets it back.
        duplicate = None
        if request.nonce < expected:
            duplicate = await pending_duplicate(services, checked.meta)
        if duplicate is None:
            raise NonceMismatch(
                "nonce is not the owner's current nonce; re-read it", {"expected": str(expected)}
            )
        return _accepted(request, duplicate)
    async with services.db.sessions() as session:
        await _refuse_during_sweep(session, invoice.id)
    await _check_balance(chain, checked, request.amount_raw)

    async def record(session: AsyncSession, row: RelayerTransaction) -> None:
        await _refuse_during_sweep(session, invoice.id)  # final: under the relayer lock
        session.add(_refund_row(checked, request, row, services.clock.now_ms()))
        await session.execute(
            update(Invoice).where(Invoice.id == invoice.id).values(has_extras=True)
        )

    try:
        row = await relay_meta(services, checked.meta, on_hold=record)
    except ContractRevert as exc:
        raise _revert_to_error(exc, expected) from exc
    return _accepted(request, row)


async def _owners_invoice(db: Database, request: RefundRequest) -> Invoice:
    owner_key = request.owner_address.lower()
    invoice = await find_by_payment_address(db, owner_key, request.payment_address)
    if invoice.chain_id != request.chain_id:
        raise NotFound("no invoice with this paymentAddress for this owner")
    return invoice


async def _signed_call(
    services: Services,
    chain: ChainGateway,
    request: RefundRequest,
    invoice: Invoice,
    token: str | None,
) -> MetaCall:
    """The refundMeta call, once the deadline and the owner's signature are checked."""
    deadline = normalize_deadline(request.deadline)
    if deadline <= services.clock.now_ms() // 1000:
        raise DeadlineExpired("deadline has passed", {"deadline": str(deadline)})
    factory = normalize_address(chain.config.factory)
    salt = bytes.fromhex(invoice.salt[2:])
    owner = request.owner_address
    typed = refund_typed_data(
        request.chain_id, factory, owner, salt, token,
        request.to_address, request.amount_raw, request.nonce, deadline,
    )  # fmt: skip
    signature = parse_signature(request.signature)
    if recover_signer(typed, signature) != owner:
        # A contract wallet signs by EIP-1271: the capped simulation asks the wallet itself.
        if len(signature) == 65 or not await chain.has_code(owner):
            raise InvalidOwnerSignature("the EIP-712 signature does not recover to ownerAddress")
    data = encode_refund_meta(
        owner, salt, token or ZERO_ADDRESS, request.to_address,
        request.amount_raw, request.nonce, deadline, signature,
    )  # fmt: skip
    return MetaCall(request.chain_id, owner, request.nonce, Call(TxPurpose.REFUND, factory, data))


async def _refuse_during_sweep(session: AsyncSession, invoice_id: str) -> None:
    """409 while a pending withdrawal holds the escrow."""
    held = await session.scalar(
        select(Withdrawal.id)
        .join(WithdrawalItem, WithdrawalItem.withdrawal_id == Withdrawal.id)
        .where(
            WithdrawalItem.invoice_id == invoice_id,
            Withdrawal.status == WithdrawalStatus.PENDING,
        )
        .limit(1)
    )
    if held is not None:
        raise SweepInProgress(
            "a sweep of this escrow is pending; refund once it is final (re-read the balance)"
        )


async def _check_balance(chain: ChainGateway, checked: _Checked, amount_raw: int) -> None:
    """What the escrow holds of the asset now (a completed invoice's escrow holds nothing)."""
    (balance,) = await chain.balances(checked.token, [checked.invoice.payment_address])
    if balance is None:
        raise ChainUnavailable("the escrow's balance could not be read; try again")
    if balance < amount_raw:
        raise InsufficientBalance(
            "the escrow holds less than amountRaw of this asset",
            {"balanceRaw": str(balance), "amountRaw": str(amount_raw)},
        )


def _refund_row(
    checked: _Checked, request: RefundRequest, row: RelayerTransaction, now_ms: int
) -> Refund:
    return Refund(
        relayer_tx_id=row.id,
        invoice_id=checked.invoice.id,
        tx_hash=row.tx_hash,
        to_address=request.to_address,
        token_address=None if checked.token is None else normalize_address(checked.token),
        amount_raw=str(request.amount_raw),
        status=RefundStatus.SUBMITTED,
        created_at=now_ms,
        updated_at=now_ms,
    )


def _revert_to_error(exc: ContractRevert, expected_nonce: int) -> Exception:
    name = revert_name(exc.revert_data)
    if name == "InvalidAccountNonce":
        return NonceMismatch(
            "nonce is not the owner's current nonce", {"expected": str(expected_nonce)}
        )
    if name == "DeadlineExpired":
        return DeadlineExpired("deadline has passed")
    if name == "InvalidSignature":
        return InvalidOwnerSignature("the EIP-712 signature does not recover to ownerAddress")
    if name == "InsufficientBalance":
        return InsufficientBalance("the escrow holds less than amountRaw of this asset")
    return InvalidRequest(f"the factory rejects this refund ({name or 'reverted'})")


def _accepted(request: RefundRequest, row: RelayerTransaction) -> dict[str, Any]:
    """The 202 body: the transaction that carries the refund."""
    return {
        "txHash": row.tx_hash,
        "chainId": request.chain_id,
        "ownerAddress": request.owner_address,
        "nonce": str(request.nonce),
        "status": "submitted",
    }


async def settle_refund(
    session: AsyncSession,
    settings: Settings,
    factory: str,
    row: RelayerTransaction,
    receipt: dict[str, Any] | None,
    now_ms: int,
) -> None:
    """Apply a final refund transaction (``settlement.tracking``): confirmed (with its
    ``invoice.refunded`` event), or failed (reverted or dropped). The rest of a native refund
    that the factory paid to the owner counts as swept from the escrow, and completes a paid
    native invoice."""
    refund = await session.scalar(
        select(Refund).where(Refund.relayer_tx_id == row.id).with_for_update()
    )
    if refund is None or refund.status != RefundStatus.SUBMITTED:
        return
    refund.updated_at = now_ms
    if row.status != TxStatus.CONFIRMED or receipt is None:
        refund.status = RefundStatus.FAILED
        return
    refund.status = RefundStatus.CONFIRMED
    refund.tx_hash = row.mined_hash or row.tx_hash
    invoice = await session.scalar(
        select(Invoice)
        .where(Invoice.id == refund.invoice_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    assert invoice is not None
    events: list[str] = [InvoiceEvent.REFUNDED]
    # The rest of a token stays in the escrow, swept as usual.
    paid_out = 0 if invoice.token_address is not None else swept_by_event(receipt, factory, None)[0]
    if paid_out > 0:
        invoice.swept_raw = str(int(invoice.swept_raw) + paid_out)
        events += apply_step(invoice, on_withdrawal_confirmed(invoice), now_ms)
        await unpark(session, [invoice.id])
    extra = {"refund": refund_view(refund)}
    await record_events(session, settings, now_ms, [Occurrence(invoice, events, extra=extra)])
