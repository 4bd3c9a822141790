"""A signed cancellation relayed by the service: the payer (or the owner) signs the
contract's EIP-712 ``Cancel(subscription)`` and the relayer sends ``cancelWithSignature``
through the payment seam (``payments.seam``), on the owner's share
(docs/integration/subscriptions.md#cancelling).

Checks before anything is sent: the subscription exists (404) and has a payer (409
``conflict`` while it awaits its authorization); the signature is the payer's or the owner's
``Cancel`` of this subscription (400 ``invalid_authorization``, ``details.field``
``signature``). A subscription cancelled on chain already is marked cancelled with nothing
sent; the same signature posted again is answered from the first send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.answers import ContractRevert
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import decode_revert
from invoicing.errors import (
    AuthorizationUsed,
    Conflict,
    InvalidAuthorization,
    InvalidOwnerSignature,
)
from invoicing.payments.seam import AuthorizationKey, relay_payment
from invoicing.payments.subscriptions.models import Subscription, SubscriptionStatus
from invoicing.payments.subscriptions.service import find_subscription, set_status, terms_of
from invoicing.payments.subscriptions.terms import Terms, encode_cancel_with_signature
from invoicing.services import Services
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import (
    NonceTaken,
    SignedRequest,
    parse_signature,
    recover_signer,
)
from invoicing.tables.settlement import RelayerTransaction, TxPurpose

# The relayed cancellation has no deadline of its own; this bounds how long its send may
# wait to be mined, as for a charge.
CANCEL_DEADLINE_S = 3600


@dataclass(frozen=True)
class SignedCancel:
    """``signer``'s signed ``Cancel`` of ``payer``'s subscription to ``terms``."""

    request: SignedRequest  # signer; nonce: the subscription's on-chain id as an integer
    terms: Terms
    payer: str
    method: str = "subscriptions"

    @property
    def key(self) -> AuthorizationKey:
        # The contract's nonce space: one cancellation per subscription id.
        r = self.request
        return AuthorizationKey(
            r.chain_id, self.terms.contract, r.signer_address, f"0x{r.nonce:064x}"
        )

    @property
    def value(self) -> int:
        # What it stops: one period's amount (the seam carries what moves or stops money).
        return self.terms.amount_raw

    @property
    def owner_address(self) -> str:
        return self.terms.owner

    def typed_data(self, deadline: int) -> dict[str, Any]:
        return self.terms.cancel_typed_data(self.payer)

    def call(self, deadline: int, signature: bytes) -> Call:
        data = encode_cancel_with_signature(
            self.terms, self.payer, self.request.signer_address, signature
        )
        return Call(TxPurpose.SUBSCRIPTION_CANCEL, self.terms.contract, data)

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        _, cancelled = await chain.subscription_state(
            self.terms.contract, self.terms.id_of(self.payer), 0
        )
        if cancelled:
            error = AuthorizationUsed("this subscription was cancelled already")
            return NonceTaken(error, maybe_ours=True)
        return None

    def revert_error(self, exc: ContractRevert) -> Exception:
        reason = decode_revert(exc.revert_data)
        name = None if reason is None else reason.name
        return InvalidAuthorization(
            "the contract refuses this cancellation in simulation",
            {"field": "signature", "reason": str(name or "reverted")},
        )

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        return None

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        return None


async def cancel_with_signature(
    services: Services, subscription_pk: str, signature: str
) -> Subscription:
    """Relay the payer's (or owner's) signed cancellation; the subscription is cancelled."""
    sub = await find_subscription(services.db, subscription_pk)
    if sub.payer is None:
        raise Conflict(
            "this subscription has no payer yet: nothing to cancel on chain",
            {"status": sub.status},
        )
    terms = terms_of(sub)
    signer = _signer(terms, sub.payer, signature)
    chain = services.chains.get(sub.chain_id)
    by = "payer" if signer == sub.payer else "owner"
    _, cancelled = await chain.subscription_state(terms.contract, terms.id_of(sub.payer), 0)
    if not cancelled:
        await relay_payment(
            services, chain, signed_cancel(services, terms, sub.payer, signer, signature)
        )
    await set_status(services, sub.id, SubscriptionStatus.CANCELLED, {"by": by})
    return await find_subscription(services.db, subscription_pk)


def signed_cancel(
    services: Services, terms: Terms, payer: str, signer: str, signature: str
) -> SignedCancel:
    deadline = services.clock.now_ms() // 1000 + CANCEL_DEADLINE_S
    nonce = int.from_bytes(terms.id_of(payer), "big")
    request = SignedRequest(terms.chain_id, signer, nonce, deadline, signature)
    return SignedCancel(request, terms, payer)


def _signer(terms: Terms, payer: str, signature: str) -> str:
    """The payer or the owner, whose key signed ``Cancel`` of this subscription."""
    try:
        signer = recover_signer(terms.cancel_typed_data(payer), parse_signature(signature))
    except InvalidOwnerSignature:
        signer = None
    if signer not in (payer, terms.owner):
        raise InvalidAuthorization(
            "the signature is not the payer's or the owner's Cancel of this subscription",
            {"field": "signature"},
        )
    assert signer is not None
    return signer
