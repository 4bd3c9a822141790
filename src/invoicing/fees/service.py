"""Owner fee settings: relay an owner-signed SetFee/SetPayout (docs/integration/fees.md).

``feeBps`` at most 500 is checked first; then ``settlement.signed_relay`` runs the steps
every signed request shares (deadline, signature, the factory's ``nonces(owner)``, a repeat
answered with its pending transaction) and relays it under the relayer's spend rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoicing.addresses import normalize_address
from invoicing.chain.calldata import MAX_FEE_BPS, encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.errors import FeeTooHigh, InvalidRequest, NotFound
from invoicing.invoices.service import find_by_payment_address
from invoicing.services import Services
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import Accepted, FactoryPurpose, SignedRequest, relay_signed
from invoicing.tables.settlement import TxPurpose


@dataclass(frozen=True)
class MetaRequest:
    """A validated set-meta or set-payout-meta body (addresses checksummed)."""

    owner_address: str
    chain_id: int
    nonce: int
    deadline: int  # as sent; normalized by ``signed_relay.normalize_deadline``
    signature: str
    fee_bps: int | None = None  # SetFee
    payout_address: str | None = None  # SetPayout

    @property
    def purpose(self) -> str:
        return TxPurpose.SET_FEE if self.fee_bps is not None else TxPurpose.SET_PAYOUT

    @property
    def signed(self) -> SignedRequest:
        owner = self.owner_address
        return SignedRequest(self.chain_id, owner, self.nonce, self.deadline, self.signature)


@dataclass(frozen=True)
class OwnerSetting(FactoryPurpose):
    """A SetFee or SetPayout, as ``signed_relay`` relays it."""

    setting: MetaRequest

    def typed_data(self, deadline: int) -> dict[str, Any]:
        meta = self.setting
        chain_id, owner, nonce = meta.chain_id, meta.owner_address, meta.nonce
        if meta.fee_bps is not None:
            return set_fee_typed_data(chain_id, self.factory, owner, meta.fee_bps, nonce, deadline)
        assert meta.payout_address is not None
        payout = meta.payout_address
        return set_payout_typed_data(chain_id, self.factory, owner, payout, nonce, deadline)

    def call(self, deadline: int, signature: bytes) -> Call:
        meta = self.setting
        owner = meta.owner_address
        if meta.fee_bps is not None:
            data = encode_set_fee_meta(owner, meta.fee_bps, meta.nonce, deadline, signature)
        else:
            assert meta.payout_address is not None
            data = encode_set_payout_meta(
                owner, meta.payout_address, meta.nonce, deadline, signature
            )
        return Call(meta.purpose, self.factory, data)

    def own_revert(self, name: str | None) -> Exception:
        if name == "FeeTooHigh":
            return FeeTooHigh(f"feeBps must be at most {MAX_FEE_BPS}")
        return InvalidRequest(f"the factory rejects this call ({name or 'reverted'})")


async def submit_meta(services: Services, request: MetaRequest) -> Accepted:
    """Check and relay a SetFee/SetPayout (``settlement.meta`` bounds what it may spend);
    returns the transaction that carries it."""
    chain = services.chains.get(request.chain_id)
    if request.fee_bps is not None and request.fee_bps > MAX_FEE_BPS:
        raise FeeTooHigh(f"feeBps must be at most {MAX_FEE_BPS}", {"max": MAX_FEE_BPS})
    factory = normalize_address(chain.config.factory)
    purpose = OwnerSetting(request.signed, factory, request)
    return await relay_signed(services, chain, purpose)


@dataclass(frozen=True)
class OwnerFees:
    """An owner's settings as the factory holds them, and the ``factory`` (the EIP-712
    verifyingContract a client signs SetFee/SetPayout for)."""

    fee_bps: int
    payout_address: str | None
    nonce: int
    factory: str


async def fee_settings(
    services: Services, chain_id: int, owner_address: str, payment_address: str | None = None
) -> OwnerFees:
    """The owner's fee settings on one chain, read from its factory; with
    ``payment_address`` (one of the owner's escrows), from the factory that made that escrow
    (a previous version's for an older one: what its Refund is signed for). NotFound when the
    owner has no invoice at that address on this chain."""
    chain = services.chains.get(chain_id)
    factory = normalize_address(chain.config.factory)
    if payment_address is not None:
        invoice = await find_by_payment_address(services.db, owner_address.lower(), payment_address)
        if invoice.chain_id != chain_id:
            raise NotFound("no invoice with this paymentAddress for this owner")
        salt = bytes.fromhex(invoice.salt[2:])
        factory = chain.factory_of(invoice.owner_address, salt, invoice.payment_address)
    fee_bps, payout = await chain.fee_settings(owner_address, factory)
    nonce = await chain.factory_nonce(owner_address, factory)
    return OwnerFees(fee_bps=fee_bps, payout_address=payout, nonce=nonce, factory=factory)
