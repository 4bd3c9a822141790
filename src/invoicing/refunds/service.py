"""Gasless refunds: check an owner-signed EIP-712 ``Refund`` of an invoice's escrow, relay it,
follow it to the end.

Checks run in a fixed order and nothing reaches the chain when one fails: the invoice is the
owner's on that chain (404) and no longer pending (409 ``invoice_pending``: a refund would
lower the reading that decides whether the payer's payment counts, see
docs/integration/refunds.md), and the token is allow-listed; then ``settlement.signed_relay``
checks the deadline, the signature and the factory's ``nonces(owner)``; then no sweep of the
escrow may be pending, and the escrow must hold at least the amount (read live; unreadable →
503). The relayer's spend rules apply (gas cap, one pending per nonce, daily budget) and,
under the relayer account lock that every withdrawal claim takes too, the refund row is
written after a last look for a pending sweep: a refund and a sweep of one escrow are never
both pending.

A refund may be signed by the owner or by the owner's refund delegate (read from the
factory that made the escrow; docs/integration/refunds.md#refund-delegate): the nonce, the
budget and the answer stay the owner's.

A void (``submit_void``) is a refund of the whole payment of a paid manual-capture invoice that
is not captured (``invoices.capture``): the amount must be what the escrow holds of the
invoice's token, and its row, marked ``voids``, is written under the invoice's row lock after
the capture refusals are checked again, so a capture and a void never both pass. Once
confirmed the invoice is voided.

A confirmed refund leaves the invoice's status alone, with one exception that is a sweep in
all but name: the factory pays the rest of a native refund to the owner (``Withdrawn``
event), which completes a paid native invoice as a withdrawal would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.calldata import encode_refund_meta
from invoicing.chain.eip712 import refund_typed_data
from invoicing.chain.gateway import ChainGateway
from invoicing.clock import Clock
from invoicing.db import Database
from invoicing.errors import (
    ChainUnavailable,
    InsufficientBalance,
    InvalidRequest,
    InvoicePending,
    NotFound,
    SweepInProgress,
    UnsupportedToken,
)
from invoicing.invoices.capture import capture_refusal, locked_invoice, refuse_unless_awaiting
from invoicing.invoices.lifecycle import (
    InvoiceEvent,
    InvoiceStatus,
    apply_step,
    on_void_confirmed,
    on_withdrawal_confirmed,
)
from invoicing.invoices.notify import Occurrence, record_events
from invoicing.invoices.owner_view import refund_view
from invoicing.invoices.service import find_by_payment_address
from invoicing.refunds.claims import approve_in
from invoicing.services import Services
from invoicing.settlement.finality import Final, OnFinal, on_final
from invoicing.settlement.parking import unpark
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import Accepted, FactoryPurpose, SignedRequest, relay_signed
from invoicing.settlement.swept import log_credits, swept_by_event
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.tables.refunds import Refund, RefundStatus
from invoicing.tables.settlement import (
    RelayerTransaction,
    TxPurpose,
    TxStatus,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)


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
    deadline: int  # as sent; normalized by ``signed_relay.normalize_deadline``
    signature: str

    @property
    def signed(self) -> SignedRequest:
        owner = self.owner_address
        return SignedRequest(self.chain_id, owner, self.nonce, self.deadline, self.signature)


async def submit_refund(
    services: Services, request: RefundRequest, *, voids: bool = False
) -> Accepted:
    """Check and relay a Refund (``voids``: a void, see above); returns the transaction that
    carries it. Nothing is sent when a check fails."""
    chain = services.chains.get(request.chain_id)
    invoice = await _owners_invoice(services.db, request)
    if voids and (refusal := capture_refusal(invoice, "void")) is not None:
        raise refusal
    if invoice.status == InvoiceStatus.PENDING:
        # Pending never comes back once left: checked once, it holds until the refund is sent.
        raise InvoicePending(
            "this invoice is still pending: refund once it is paid or expired (or cancel it first)",
            {"status": invoice.status},
        )
    # The factory that made the escrow refunds it (a previous version's, for an escrow it
    # made: ``chain.versions``); no factory can take coin back.
    salt = bytes.fromhex(invoice.salt[2:])
    factory = chain.factory_of(invoice.owner_address, salt, invoice.payment_address)
    if request.to_address in (ZERO_ADDRESS, *chain.config.factories, invoice.payment_address):
        raise InvalidRequest(
            "to must not be the zero address, the factory or the escrow", {"field": "to"}
        )
    token = request.token_address if request.token_given else invoice.token_address
    if token is not None and chain.config.token(token) is None:
        raise UnsupportedToken(
            "tokenAddress is not on this chain's allow-list", {"tokenAddress": token}
        )
    delegate = await chain.refund_delegate(invoice.owner_address, factory)
    signed = replace(request.signed, delegate=delegate)
    purpose = EscrowRefund(signed, factory, request, invoice, token, services.clock, voids)
    return await relay_signed(services, chain, purpose)


async def _owners_invoice(db: Database, request: RefundRequest) -> InvoiceRow:
    owner_key = request.owner_address.lower()
    invoice = await find_by_payment_address(db, owner_key, request.payment_address)
    if invoice.chain_id != request.chain_id:
        raise NotFound("no invoice with this paymentAddress for this owner")
    return invoice


@dataclass(frozen=True)
class EscrowRefund(FactoryPurpose):
    """A Refund from an invoice's escrow, as ``signed_relay`` relays it: no sweep of the
    escrow may be pending, and the escrow must hold the amount."""

    refund: RefundRequest
    invoice: InvoiceRow
    token: str | None  # None: the native coin
    clock: Clock
    voids: bool = False  # a void: the whole payment, while the invoice awaits its capture

    def typed_data(self, deadline: int) -> dict[str, Any]:
        r = self.refund
        return refund_typed_data(
            r.chain_id, self.factory, r.owner_address, self._salt, self.token,
            r.to_address, r.amount_raw, r.nonce, deadline,
        )  # fmt: skip

    def call(self, deadline: int, signature: bytes) -> Call:
        r = self.refund
        data = encode_refund_meta(
            r.owner_address, self._salt, self.token or ZERO_ADDRESS, r.to_address,
            r.amount_raw, r.nonce, deadline, signature,
        )  # fmt: skip
        return Call(TxPurpose.REFUND, self.factory, data)

    @property
    def _salt(self) -> bytes:
        return bytes.fromhex(self.invoice.salt[2:])

    def own_revert(self, name: str | None) -> Exception:
        if name == "InsufficientBalance":
            return InsufficientBalance("the escrow holds less than amountRaw of this asset")
        return InvalidRequest(f"the factory rejects this refund ({name or 'reverted'})")

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        async with services.db.sessions() as session:
            if self.voids:
                row = await session.get(Invoice, self.invoice.id, populate_existing=True)
                assert row is not None
                await refuse_unless_awaiting(session, row, "void")
            await _refuse_during_sweep(session, self.invoice.id)
        await self._check_balance(chain)

    async def _check_balance(self, chain: ChainGateway) -> None:
        """What the escrow holds of the asset now (a completed invoice's escrow holds nothing)."""
        (balance,) = await chain.balances(self.token, [self.invoice.payment_address])
        amount_raw = self.refund.amount_raw
        if balance is None:
            raise ChainUnavailable("the escrow's balance could not be read; try again")
        if self.voids and balance != amount_raw:
            raise InvalidRequest(
                "a void returns the whole payment: amountRaw must be what the escrow holds",
                {"field": "amountRaw", "balanceRaw": str(balance)},
            )
        if balance < amount_raw:
            raise InsufficientBalance(
                "the escrow holds less than amountRaw of this asset",
                {"balanceRaw": str(balance), "amountRaw": str(amount_raw)},
            )

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        await _refuse_during_sweep(session, self.invoice.id)  # final: under the relayer lock
        if self.voids:  # final too: under the invoice's row lock, which a capture takes
            r = self.refund
            locked = await locked_invoice(
                session, r.owner_address.lower(), r.chain_id, self.invoice.payment_address
            )
            await refuse_unless_awaiting(session, locked, "void")
        now_ms = self.clock.now_ms()
        session.add(self._refund_row(row, now_ms))
        await approve_in(session, self.invoice.id, self.refund.to_address, now_ms)
        await session.execute(
            update(Invoice).where(Invoice.id == self.invoice.id).values(has_extras=True)
        )

    def _refund_row(self, row: RelayerTransaction, now_ms: int) -> Refund:
        return Refund(
            relayer_tx_id=row.id,
            invoice_id=self.invoice.id,
            tx_hash=row.tx_hash,
            to_address=self.refund.to_address,
            token_address=None if self.token is None else normalize_address(self.token),
            amount_raw=str(self.refund.amount_raw),
            status=RefundStatus.SUBMITTED,
            voids=self.voids,
            created_at=now_ms,
            updated_at=now_ms,
        )


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


async def settle_refund(session: AsyncSession, services: Services, final: Final[None]) -> None:
    """Apply a final refund transaction (``settlement.finality``): confirmed (with its
    ``invoice.refunded`` event), or failed (reverted or dropped). The rest of a native refund
    that the factory paid to the owner counts as swept from the escrow, and completes a paid
    native invoice."""
    row, receipt, now_ms = final.row, final.receipt, final.now_ms
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
    if refund.voids:
        events += apply_step(invoice, on_void_confirmed(invoice), now_ms)
    # The rest of a token stays in the escrow, swept as usual.
    native = invoice.token_address is None
    paid_out = swept_by_event(receipt, final.factory, None)[0] if native else 0
    log_credits(receipt, final.factory, row.chain_id)
    if paid_out > 0:
        invoice.swept_raw = str(int(invoice.swept_raw) + paid_out)
        events += apply_step(invoice, on_withdrawal_confirmed(invoice), now_ms)
        await unpark(session, [invoice.id])
    extra = {"refund": refund_view(refund)}
    occurrence = Occurrence(invoice, events, extra=extra)
    await record_events(session, services.settings, now_ms, [occurrence])


on_final(TxPurpose.REFUND, OnFinal(settle_refund))
