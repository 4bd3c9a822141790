"""Gasless payments: a payer's EIP-3009 ``TransferWithAuthorization`` into an invoice's
escrow, checked here and carried by the payment seam (``payments.seam``;
docs/integration/gasless.md).

The payer signs, in the token's EIP-712 domain, ``from`` (the payer), ``to`` (the invoice's
escrow), ``value`` (the amount still due), a validity window and a random 32-byte nonce.
Checks run before anything is sent, each refusal a documented 4xx and nothing sent:

1. the invoice exists (404) and its token has EIP-3009 (400 ``gasless_unavailable``);
2. the request names the invoice's chain and token (the domain; 400 ``invalid_authorization``
   with ``details.field``), ``to`` is the escrow, the invoice takes payments (pending, not
   expired, not deleted; 409 ``invoice_not_payable``), ``value`` is the amount still due (read
   live), and the window is open with at least ``gasless_min_validity_left_s`` left and at
   most ``gasless_max_validity_s`` long;
3. the seam then checks the owner's opt-in, that the authorization was not carried before,
   whose share pays, the signature (EOA, or EIP-1271 for a contract wallet by the capped
   simulation) and the nonce (``authorizationState``; 409 ``authorization_used``), and through
   this purpose the payer's balance (400 ``insufficient_balance``) and that no other gasless
   payment of the invoice is pending; a revert of the simulation is 400
   ``invalid_authorization``.

The same authorization sent again answers with the transaction of the first (one
transaction, one hash). One that someone else submitted first has paid the escrow: it is
refused (409 ``invoice_not_payable``, or ``authorization_used`` once the token marks its nonce
used) and the payment is noticed at once: the invoice is re-checked live, so it shows paid.
For that re-check the module runs up to ``monitor.check`` (a unit of its own floor), the one
home of the live re-check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import address_bytes, normalize_address
from invoicing.chain.answers import ContractRevert
from invoicing.chain.config import Eip712Domain, TokenConfig
from invoicing.chain.eip3009 import (
    Authorization,
    encode_transfer_with_authorization,
    transfer_typed_data,
)
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import decode_revert
from invoicing.errors import (
    AuthorizationUsed,
    ChainUnavailable,
    DeadlineExpired,
    GaslessUnavailable,
    InsufficientBalance,
    InvalidAuthorization,
    InvalidOwnerSignature,
    InvoiceNotPayable,
    NotFound,
    UnsupportedChain,
)
from invoicing.hashing import keccak256
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.invoices.service import invoice_at
from invoicing.monitor.check import recheck_invoice
from invoicing.payments.eip3009.models import GaslessPayment, GaslessStatus
from invoicing.payments.method import PaymentMethod
from invoicing.payments.opt_in import is_enabled
from invoicing.payments.seam import (
    AuthorizationKey,
    Relayed,
    carried_before,
    relay_payment,
    settle_authorization,
)
from invoicing.services import Services
from invoicing.settlement.finality import Final, OnFinal
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import NonceTaken, SignedRequest
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import RelayerTransaction, TxPurpose, TxStatus


@dataclass(frozen=True)
class PayerAuthorization:
    """A submitted authorization for the invoice at ``payment_address``: the domain it was
    signed in (``chain_id``, ``token_address``), the message, and the signature."""

    payment_address: str
    chain_id: int
    token_address: str
    authorization: Authorization
    signature: str


@dataclass(frozen=True)
class GaslessAccepted:
    """The transaction that carries the authorization, and where it stands."""

    tx_hash: str
    chain_id: int
    payer: str
    nonce: str  # 0x + 64 hex digits
    status: str  # a GaslessStatus value


async def submit_authorization(services: Services, request: PayerAuthorization) -> GaslessAccepted:
    """Check and relay a payer's authorization (the module's steps); nothing is sent when a
    check fails."""
    invoice = await invoice_at(services.db, request.payment_address)
    chain = services.chains.get(invoice.chain_id)
    token = await gasless_token(services, chain, invoice)
    _check_domain(invoice, request)
    auth = request.authorization
    signed = _signed(invoice, request)
    purpose = EscrowAuthorization(signed, invoice.owner_address, token, auth, invoice)
    earlier = await carried_before(services.db, purpose)
    if earlier is not None:
        return _answer(invoice, auth, earlier)
    _check_terms(services, invoice, auth)
    try:
        await _check_value(chain, invoice, auth)
    except InvoiceNotPayable:
        await _notice(services, invoice)  # paid by someone (this very authorization, maybe)
        raise
    try:
        relayed = await relay_payment(services, chain, purpose)
    except InvalidOwnerSignature as exc:
        raise InvalidAuthorization(
            "the signature is not the payer's for this authorization (EIP-712 in the token's "
            "domain), or its wallet's check needs more gas than the relayer gives",
            {"field": "signature", **(exc.details or {})},
        ) from exc
    except DeadlineExpired as exc:
        raise InvalidAuthorization("validBefore has passed", {"field": "validBefore"}) from exc
    except AuthorizationUsed as exc:
        await _notice(services, invoice)
        raise exc
    return _answer(invoice, auth, relayed)


def _answer(invoice: Invoice, auth: Authorization, relayed: Relayed) -> GaslessAccepted:
    """The transaction that carries the authorization, this time or before."""
    tx_hash = relayed.accepted.tx_hash
    return GaslessAccepted(
        tx_hash, invoice.chain_id, auth.from_address, _hex(auth.nonce), relayed.status
    )


async def gasless_token(services: Services, chain: ChainGateway, invoice: Invoice) -> TokenConfig:
    """The invoice's token when its invoice can be paid without gas (400 otherwise)."""
    token = None if invoice.token_address is None else chain.config.token(invoice.token_address)
    if token is None or token.eip3009 is None:
        raise GaslessUnavailable("this invoice's token cannot be paid without gas (no EIP-3009)")
    if not await is_enabled(services.db, invoice.owner_address, invoice.chain_id):
        raise GaslessUnavailable("the invoice's owner has not turned gasless payments on")
    return token


async def page_offer(services: Services, payment_address: str) -> Eip712Domain | None:
    """The token's EIP-712 domain when the payment page should offer "Pay without gas" for
    the invoice at ``payment_address`` (its token has EIP-3009, its owner opted in, and it
    is pending); None otherwise."""
    try:
        invoice = await invoice_at(services.db, payment_address)
        if invoice.status != InvoiceStatus.PENDING or invoice.deleted_at is not None:
            return None
        chain = services.chains.get(invoice.chain_id)
        return (await gasless_token(services, chain, invoice)).eip3009
    except (NotFound, GaslessUnavailable, UnsupportedChain):
        return None


def _signed(invoice: Invoice, request: PayerAuthorization) -> SignedRequest:
    auth = request.authorization
    nonce = int.from_bytes(auth.nonce, "big")
    return SignedRequest(
        invoice.chain_id, auth.from_address, nonce, auth.valid_before, request.signature
    )


def _check_domain(invoice: Invoice, request: PayerAuthorization) -> None:
    if request.chain_id != invoice.chain_id:
        raise InvalidAuthorization(
            "signed for another chain", {"field": "chainId", "expected": invoice.chain_id}
        )
    if normalize_address(request.token_address) != invoice.token_address:
        raise InvalidAuthorization(
            "signed for another token", {"field": "tokenAddress", "expected": invoice.token_address}
        )


def _check_terms(services: Services, invoice: Invoice, auth: Authorization) -> None:
    """``to``, the invoice taking payments, and the validity window."""
    if auth.to_address != invoice.payment_address:
        raise InvalidAuthorization(
            "to must be the invoice's paymentAddress",
            {"field": "to", "expected": invoice.payment_address},
        )
    now_ms = services.clock.now_ms()
    takes = invoice.status == InvoiceStatus.PENDING and invoice.deleted_at is None
    if not takes or now_ms >= invoice.expires_at:
        raise InvoiceNotPayable("this invoice takes no payment now", {"status": invoice.status})
    now_s = now_ms // 1000
    settings = services.settings
    if auth.valid_after >= now_s:
        raise InvalidAuthorization("validAfter must be in the past", {"field": "validAfter"})
    if auth.valid_before < now_s + settings.gasless_min_validity_left_s:
        raise InvalidAuthorization(
            f"validBefore must leave at least {settings.gasless_min_validity_left_s} s",
            {"field": "validBefore"},
        )
    if auth.valid_before > now_s + settings.gasless_max_validity_s:
        raise InvalidAuthorization(
            f"validBefore may be at most {settings.gasless_max_validity_s} s away",
            {"field": "validBefore"},
        )


async def _check_value(chain: ChainGateway, invoice: Invoice, auth: Authorization) -> None:
    """``value`` is what the invoice still needs (read live)."""
    (balance,) = await chain.balances(invoice.token_address, [invoice.payment_address])
    if balance is None:
        raise ChainUnavailable("the escrow's balance could not be read; try again")
    due = int(invoice.required_raw) - balance
    if due <= 0:
        raise InvoiceNotPayable("this invoice is paid in full", {"status": "paid"})
    if auth.value != due:
        raise InvalidAuthorization(
            "value must be the amount still due", {"field": "value", "expected": str(due)}
        )


async def _notice(services: Services, invoice: Invoice) -> None:
    """Someone else submitted the authorization first: read the escrow now."""
    try:
        await recheck_invoice(services, invoice)
    except ChainUnavailable:
        pass  # the monitor sees it at its next pass


def _hex(nonce: bytes) -> str:
    return "0x" + nonce.hex()


def _request_hash(to: str, data: bytes) -> str:
    """As ``settlement.meta`` hashes a request: the target and the calldata."""
    return "0x" + keccak256(address_bytes(to) + data).hex()


@dataclass(frozen=True)
class EscrowAuthorization:
    """A payer's transfer into an invoice's escrow, as ``signed_relay`` relays it: the
    token's random nonces (``authorizationState``), its reverts, and the owner's share."""

    request: SignedRequest
    owner_address: str  # the payee: its opt-in and its share count
    token: TokenConfig
    authorization: Authorization
    # The invoice paid (None: a transfer to the owner through its x402 facilitator).
    invoice: Invoice | None = None
    method: str = "eip3009"

    @property
    def key(self) -> AuthorizationKey:
        auth = self.authorization
        return AuthorizationKey(
            self.request.chain_id, self.token.address, auth.from_address, _hex(auth.nonce)
        )

    @property
    def value(self) -> int:
        return self.authorization.value

    def typed_data(self, deadline: int) -> dict[str, Any]:
        assert self.token.eip3009 is not None
        domain, chain_id = self.token.eip3009, self.request.chain_id
        return transfer_typed_data(domain, chain_id, self.token.address, self.authorization)

    def call(self, deadline: int, signature: bytes) -> Call:
        data = encode_transfer_with_authorization(self.authorization, signature)
        return Call(TxPurpose.GASLESS, self.token.address, data)  # the seam names the spender

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        auth = self.authorization
        if not await chain.authorization_state(self.token.address, auth.from_address, auth.nonce):
            return None
        error = AuthorizationUsed(
            "the token has used or canceled this authorization's nonce (submitted by someone "
            "else first, or canceled)"
        )
        return NonceTaken(error, maybe_ours=True)

    def revert_error(self, exc: ContractRevert) -> Exception:
        reason = decode_revert(exc.revert_data)
        name = None if reason is None else reason.name
        if name == "AuthorizationUsedOrCanceled":
            return AuthorizationUsed("the token has used or canceled this authorization's nonce")
        if name == "InvalidAuthorizationSignature":
            return InvalidAuthorization("the signature is not the payer's", {"field": "signature"})
        said = reason.args[0] if reason is not None and name == "Error" else name
        return InvalidAuthorization(
            "the token refuses this transfer in simulation",
            {"field": "simulation", "reason": str(said or "reverted")},
        )

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        auth = self.authorization
        (balance,) = await chain.balances(self.token.address, [auth.from_address])
        if balance is None:
            raise ChainUnavailable("the payer's balance could not be read; try again")
        if balance < auth.value:
            raise InsufficientBalance(
                "the payer holds less than value of this token",
                {"balanceRaw": str(balance), "value": str(auth.value)},
            )
        if self.invoice is None:
            return
        async with services.db.sessions() as session:
            await _refuse_while_pending(session, self.invoice.id)

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        if self.invoice is None:
            return
        await _refuse_while_pending(session, self.invoice.id)  # final: under the relayer lock
        auth = self.authorization
        session.add(
            GaslessPayment(
                relayer_tx_id=row.id,
                invoice_id=self.invoice.id,
                chain_id=self.invoice.chain_id,
                payer=auth.from_address,
                nonce=_hex(auth.nonce),
                value_raw=str(auth.value),
                valid_before=auth.valid_before,
                request_hash=_request_hash(row.to_address, bytes.fromhex(row.data[2:])),
                tx_hash=row.tx_hash,
                status=GaslessStatus.SUBMITTED,
                created_at=row.created_at,
                updated_at=row.created_at,
            )
        )


async def _refuse_while_pending(session: AsyncSession, invoice_id: str) -> None:
    """409 while another gasless payment of the invoice is pending (it would pay twice)."""
    held = await session.scalar(
        select(GaslessPayment.tx_hash)
        .where(
            GaslessPayment.invoice_id == invoice_id,
            GaslessPayment.status == GaslessStatus.SUBMITTED,
        )
        .limit(1)
    )
    if held is not None:
        raise InvoiceNotPayable(
            "a payment of this invoice is pending", {"status": "pending", "txHash": held}
        )


async def settle_gasless(session: AsyncSession, services: Services, final: Final[None]) -> None:
    """A final gasless transaction: confirmed, or failed (reverted or dropped). The payment
    itself is the monitor's to see, as any payment into the escrow."""
    await settle_authorization(session, final)
    row = final.row
    status = GaslessStatus.CONFIRMED if row.status == TxStatus.CONFIRMED else GaslessStatus.FAILED
    await session.execute(
        update(GaslessPayment)
        .where(GaslessPayment.relayer_tx_id == row.id)
        .values(status=status, updated_at=final.now_ms)
    )


# The x402 facilitator's transfers share the purpose: their rows are the seam's alone.
EIP3009 = PaymentMethod(
    "eip3009", finality={TxPurpose.GASLESS: OnFinal(settle_gasless)}, page_offer=page_offer
)
