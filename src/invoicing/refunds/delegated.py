"""Refunds the service signs itself, as the owner's refund delegate
(docs/integration/refunds.md#refunds-the-service-signs).

A shop server holds an API key, not a key that can sign. When the service holds a delegate
key (``INVOICING_REFUND_DELEGATE_KEY``) and the owner has named its address as the refund
delegate on the factory that made the escrow (one ``SetRefundDelegate``, signed in the
dashboard), the owner's API key can ask for a refund and the service signs the ``Refund``
with that key, at the owner's current factory nonce, then hands it to the signed refund path
(``refunds.service.submit_refund``): the same checks, relayer rules, rows and events.

What the service signs is narrower than what a delegate may sign: the refund always goes to
the payer of record (the sender of the invoice's first recorded payment in its token), in the
invoice's token, so an API key that leaks can send nobody's money anywhere but back.
Each refund is still bounded by what the escrow holds, read live by the refund path.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from invoicing.addresses import normalize_address
from invoicing.chain.eip712 import refund_typed_data
from invoicing.errors import InvalidRequest, NoPayerOfRecord, NotFound, RefundDelegateNotNamed
from invoicing.invoices.amounts import AMOUNT_PATTERN, to_raw
from invoicing.invoices.service import find_by_payment_address
from invoicing.refunds.service import RefundRequest, submit_refund
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.signed_relay import Accepted
from invoicing.tables.invoices import InvoiceRow
from invoicing.tables.records import PaymentRecord

# How long the Refund the service signs stays valid: it is relayed at once.
DEADLINE_S = 600


@dataclass(frozen=True)
class ServiceRefund:
    """A refund asked with the owner's credentials: exactly one of ``amount_raw`` and
    ``amount`` (a decimal string in the invoice's price: its fiat currency when it has one,
    else its token)."""

    owner_address: str
    chain_id: int
    payment_address: str
    amount_raw: int | None
    amount: str | None


@dataclass(frozen=True)
class SignedByService:
    """A refund the service signed and relayed: to whom, how much, in which transaction."""

    accepted: Accepted
    to_address: str
    amount_raw: int


def service_delegate(settings: Settings) -> LocalAccount | None:
    """The service's delegate account, when it holds a key."""
    key = settings.refund_delegate_key
    return None if key is None else Account.from_key(key.get_secret_value())


async def refund_by_service(services: Services, request: ServiceRefund) -> SignedByService:
    """Sign the Refund as the owner's delegate and relay it; nothing is sent when a check
    fails (checked in this order: the invoice, the amount, the delegate, the payer of
    record, then everything ``submit_refund`` checks)."""
    chain = services.chains.get(request.chain_id)
    owner_key = request.owner_address.lower()
    invoice = await find_by_payment_address(services.db, owner_key, request.payment_address)
    if invoice.chain_id != request.chain_id:
        raise NotFound("no invoice with this paymentAddress for this owner")
    amount_raw = raw_amount(invoice, request)
    account = service_delegate(services.settings)
    if account is None:
        raise RefundDelegateNotNamed(
            "this service holds no refund delegate key (INVOICING_REFUND_DELEGATE_KEY)"
        )
    salt = bytes.fromhex(invoice.salt[2:])
    factory = chain.factory_of(invoice.owner_address, salt, invoice.payment_address)
    named = await chain.refund_delegate(invoice.owner_address, factory)
    if named is None or named.lower() != account.address.lower():
        raise RefundDelegateNotNamed(
            "name this service's refund delegate first (dashboard, Settings)",
            {"delegate": account.address, "named": named},
        )
    to = await payer_of_record(services, invoice)
    nonce = await chain.factory_nonce(invoice.owner_address, factory)
    deadline = services.clock.now_ms() // 1000 + DEADLINE_S
    typed = refund_typed_data(
        request.chain_id, factory, invoice.owner_address, salt, invoice.token_address, to,
        amount_raw, nonce, deadline,
    )  # fmt: skip
    signature = account.sign_typed_data(full_message=typed).signature.to_0x_hex()
    refund = RefundRequest(
        owner_address=invoice.owner_address,
        chain_id=request.chain_id,
        payment_address=invoice.payment_address,
        to_address=to,
        amount_raw=amount_raw,
        token_address=invoice.token_address,
        token_given=False,
        nonce=nonce,
        deadline=deadline,
        signature=signature,
    )
    accepted = await submit_refund(services, refund)
    return SignedByService(accepted, to, amount_raw)


async def payer_of_record(services: Services, invoice: InvoiceRow) -> str:
    """The sender of the invoice's first recorded payment in its own token."""
    token = invoice.token_address
    async with services.db.sessions() as session:
        payer = await session.scalar(
            select(PaymentRecord.from_address)
            .where(
                PaymentRecord.invoice_id == invoice.id,
                PaymentRecord.token_address.is_(None)
                if token is None
                else PaymentRecord.token_address == normalize_address(token),
            )
            .order_by(PaymentRecord.block_number, PaymentRecord.tx_hash, PaymentRecord.source)
            .limit(1)
        )
    if payer is None:
        raise NoPayerOfRecord(
            "the payment of this invoice is not recorded yet (who paid is unknown): retry shortly"
        )
    return normalize_address(payer)


def raw_amount(invoice: InvoiceRow, request: ServiceRefund) -> int:
    """The raw units asked: ``amount_raw``, or ``amount`` of the invoice's price. A share of a
    fiat price is the same share of the raw amount it locked, rounded down."""
    if (request.amount_raw is None) == (request.amount is None):
        raise InvalidRequest("give exactly one of amount and amountRaw", {"field": "amount"})
    if request.amount_raw is not None:
        return request.amount_raw
    assert request.amount is not None
    if invoice.currency is None or invoice.fiat_amount is None:
        return to_raw(request.amount, invoice.decimals)
    part, price = _units(request.amount), _units(invoice.fiat_amount)
    scale = max(part[1], price[1])
    part_units = part[0] * 10 ** (scale - part[1])
    price_units = price[0] * 10 ** (scale - price[1])
    if part_units > price_units:
        raise InvalidRequest(
            "amount is more than the invoice's price",
            {"field": "amount", "price": invoice.fiat_amount, "currency": invoice.currency},
        )
    raw: int = int(invoice.required_raw) * part_units // price_units
    if raw == 0:
        raise InvalidRequest("amount is less than one raw unit", {"field": "amount"})
    return raw


def _units(decimal: str) -> tuple[int, int]:
    """``"12.50"`` → (1250, 2)."""
    if len(decimal) > 40 or not AMOUNT_PATTERN.match(decimal):
        raise InvalidRequest(
            'amount must be a positive decimal string such as "12.50"', {"field": "amount"}
        )
    whole, _, fraction = decimal.partition(".")
    units = int(whole + fraction)
    if units == 0:
        raise InvalidRequest("amount must be greater than zero", {"field": "amount"})
    return units, len(fraction)
