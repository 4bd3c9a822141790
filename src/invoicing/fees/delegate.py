"""The owner's refund delegate: relay an owner-signed SetRefundDelegate
(docs/integration/refunds.md#refund-delegate).

A shop server that holds an API key but not the owner's key may then sign the owner's
refunds (``refunds.service`` accepts the delegate's signature of a Refund). The delegate
signs nothing else that counts: the factory takes fee, payout and delegate changes only from
the owner. ``settlement.signed_relay`` runs the steps every signed request shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoicing.addresses import normalize_address
from invoicing.chain.calldata import encode_set_refund_delegate_meta
from invoicing.chain.eip712 import set_refund_delegate_typed_data
from invoicing.errors import InvalidRequest
from invoicing.services import Services
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import Accepted, FactoryPurpose, SignedRequest, relay_signed
from invoicing.tables.settlement import TxPurpose


@dataclass(frozen=True)
class DelegateRequest:
    """A validated refund-delegate body (addresses checksummed; the zero address revokes)."""

    owner_address: str
    chain_id: int
    delegate: str
    nonce: int
    deadline: int  # as sent; normalized by ``signed_relay.normalize_deadline``
    signature: str

    @property
    def signed(self) -> SignedRequest:
        owner = self.owner_address
        return SignedRequest(self.chain_id, owner, self.nonce, self.deadline, self.signature)


@dataclass(frozen=True)
class RefundDelegateSetting(FactoryPurpose):
    """A SetRefundDelegate, as ``signed_relay`` relays it."""

    setting: DelegateRequest

    def typed_data(self, deadline: int) -> dict[str, Any]:
        s = self.setting
        return set_refund_delegate_typed_data(
            s.chain_id, self.factory, s.owner_address, s.delegate, s.nonce, deadline
        )

    def call(self, deadline: int, signature: bytes) -> Call:
        s = self.setting
        data = encode_set_refund_delegate_meta(
            s.owner_address, s.delegate, s.nonce, deadline, signature
        )
        return Call(TxPurpose.SET_REFUND_DELEGATE, self.factory, data)

    def own_revert(self, name: str | None) -> Exception:
        return InvalidRequest(f"the factory rejects this call ({name or 'reverted'})")


async def submit_refund_delegate(services: Services, request: DelegateRequest) -> Accepted:
    """Check and relay a SetRefundDelegate to the chain's current factory (the one whose
    escrows new invoices get); returns the transaction that carries it."""
    chain = services.chains.get(request.chain_id)
    factory = normalize_address(chain.config.factory)
    if request.delegate.lower() == request.owner_address.lower():
        raise InvalidRequest("delegate must not be the owner", {"field": "delegate"})
    purpose = RefundDelegateSetting(request.signed, factory, request)
    return await relay_signed(services, chain, purpose)
