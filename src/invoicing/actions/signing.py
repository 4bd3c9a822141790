"""The prepare step of the money actions an owner signs in its wallet (a refund, the fee, the
payout address): the exact EIP-712 typed data, at the owner's current factory nonce, with a
deadline ``DEADLINE_S`` ahead of the services' clock, and the fields to submit with the
signature. Submitting goes through the same pipeline as the API's ``refund-meta`` and
``set-meta`` (``refunds.service``, ``fees.service``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoicing.addresses import normalize_address
from invoicing.chain.calldata import MAX_FEE_BPS
from invoicing.chain.eip712 import (
    refund_typed_data,
    set_fee_typed_data,
    set_payout_typed_data,
    set_refund_delegate_typed_data,
)
from invoicing.errors import FeeTooHigh, InvalidRequest
from invoicing.fees.service import fee_settings
from invoicing.services import Services
from invoicing.tables.invoices import Invoice, InvoiceRow

DEADLINE_S = 3600


@dataclass(frozen=True)
class Prepared:
    """What the owner signs (``typed``) and what is submitted with the signature."""

    chain_id: int
    typed: dict[str, Any]
    submit: dict[str, str]


def _deadline(services: Services) -> int:
    return services.clock.now_ms() // 1000 + DEADLINE_S


async def prepare_refund(
    services: Services, owner: str, invoice: Invoice | InvoiceRow, to: str, amount_raw: int
) -> Prepared:
    """A Refund of ``amount_raw`` from the invoice's escrow to ``to``, signed for the factory
    that made the escrow (a previous version's, for an older one)."""
    if amount_raw <= 0:
        raise InvalidRequest("amount: must be positive", {"field": "amount"})
    chain = services.chains.get(invoice.chain_id)
    salt = bytes.fromhex(invoice.salt[2:])
    factory = chain.factory_of(owner, salt, invoice.payment_address)
    nonce = await chain.factory_nonce(owner, factory)
    deadline = _deadline(services)
    typed = refund_typed_data(
        invoice.chain_id, factory, owner, salt, invoice.token_address, to, amount_raw, nonce,
        deadline,
    )  # fmt: skip
    submit = {
        "to": to,
        "amountRaw": str(amount_raw),
        "nonce": str(nonce),
        "deadline": str(deadline),
    }
    return Prepared(invoice.chain_id, typed, submit)


async def prepare_set_fee(services: Services, owner: str, chain_id: int, fee_bps: int) -> Prepared:
    if fee_bps > MAX_FEE_BPS:
        raise FeeTooHigh(f"feeBps must be at most {MAX_FEE_BPS}")
    fees = await fee_settings(services, chain_id, owner)
    deadline = _deadline(services)
    typed = set_fee_typed_data(chain_id, fees.factory, owner, fee_bps, fees.nonce, deadline)
    return _meta(chain_id, typed, ("feeBps", str(fee_bps)), fees.nonce, deadline)


async def prepare_set_payout(
    services: Services, owner: str, chain_id: int, payout: str
) -> Prepared:
    fees = await fee_settings(services, chain_id, owner)
    deadline = _deadline(services)
    typed = set_payout_typed_data(chain_id, fees.factory, owner, payout, fees.nonce, deadline)
    return _meta(chain_id, typed, ("payoutAddress", payout), fees.nonce, deadline)


async def prepare_set_refund_delegate(
    services: Services, owner: str, chain_id: int, delegate: str
) -> Prepared:
    """A SetRefundDelegate for the chain's current factory (the one that makes new escrows);
    the zero address revokes."""
    chain = services.chains.get(chain_id)
    factory = normalize_address(chain.config.factory)
    nonce = await chain.factory_nonce(owner, factory)
    deadline = _deadline(services)
    typed = set_refund_delegate_typed_data(chain_id, factory, owner, delegate, nonce, deadline)
    return _meta(chain_id, typed, ("delegate", delegate), nonce, deadline)


def _meta(
    chain_id: int, typed: dict[str, Any], change: tuple[str, str], nonce: int, deadline: int
) -> Prepared:
    name, value = change
    submit = {"chainId": str(chain_id), name: value, "nonce": str(nonce), "deadline": str(deadline)}
    return Prepared(chain_id, typed, submit)
