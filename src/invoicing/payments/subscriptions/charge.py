"""One period's charge, as the payment seam carries it (``payments.seam``): the payer's
signed ``Subscription`` presented to ``Subscriptions.charge`` for that period. The seam
enforces the owner's opt-in, once-only (the authorization key is (chain, token, payer, the
period's escrow salt)), whose share pays, the payer's failure limit, the signature and the
simulation; this purpose adds what differs: the contract's bitmap as the nonce, its
reverts, and the payer's allowance and balance before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.chain.answers import ContractRevert
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import decode_revert
from invoicing.errors import (
    AuthorizationUsed,
    ChainUnavailable,
    InsufficientBalance,
    InvalidAuthorization,
)
from invoicing.payments.seam import AuthorizationKey
from invoicing.payments.subscriptions.models import ChargeStatus, SubscriptionCharge
from invoicing.payments.subscriptions.terms import Terms, encode_charge, period_salt
from invoicing.services import Services
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import NonceTaken, SignedRequest
from invoicing.tables.settlement import RelayerTransaction, TxPurpose


@dataclass(frozen=True)
class PeriodCharge:
    """Period ``period`` of ``payer``'s subscription to ``terms``, into its invoice."""

    request: SignedRequest  # signer: the payer; nonce: the period's salt as an integer
    terms: Terms
    payer: str
    period: int
    subscription_pk: str
    method: str = "subscriptions"

    @property
    def salt(self) -> bytes:
        return period_salt(self.terms.id_of(self.payer), self.period)

    @property
    def key(self) -> AuthorizationKey:
        t = self.terms
        return AuthorizationKey(t.chain_id, t.token, self.payer, "0x" + self.salt.hex())

    @property
    def value(self) -> int:
        return self.terms.amount_raw

    @property
    def owner_address(self) -> str:
        return self.terms.owner

    def typed_data(self, deadline: int) -> dict[str, Any]:
        return self.terms.typed_data()  # signed once, with no deadline

    def call(self, deadline: int, signature: bytes) -> Call:
        data = encode_charge(self.terms, self.payer, signature, self.period)
        return Call(TxPurpose.SUBSCRIPTION_CHARGE, self.terms.contract, data)

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        subscription_id = self.terms.id_of(self.payer)
        charged, cancelled = await chain.subscription_state(
            self.terms.contract, subscription_id, self.period
        )
        if cancelled:
            return NonceTaken(AuthorizationUsed("this subscription was cancelled"), False)
        if charged:
            error = AuthorizationUsed("this period of the subscription was charged already")
            return NonceTaken(error, maybe_ours=True)
        return None

    def revert_error(self, exc: ContractRevert) -> Exception:
        reason = decode_revert(exc.revert_data)
        name = None if reason is None else reason.name
        if name in ("AlreadyCharged", "SubscriptionCancelled", "SubscriptionFinished"):
            return AuthorizationUsed(f"the contract refuses the charge ({name})")
        if name == "InvalidSignature":
            return InvalidAuthorization("the signature is not the payer's", {"field": "signature"})
        said = reason.args[0] if reason is not None and name == "Error" else name
        return InvalidAuthorization(
            "the contract refuses this charge in simulation",
            {"field": "simulation", "reason": str(said or "reverted")},
        )

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        """The payer's allowance to the contract and its balance cover one period."""
        t = self.terms
        allowance = await chain.allowance(t.token, self.payer, t.contract)
        if allowance < t.amount_raw:
            raise InvalidAuthorization(
                "the payer's allowance to the subscriptions contract is below one period",
                {"field": "allowance", "allowanceRaw": str(allowance), "spender": t.contract},
            )
        (balance,) = await chain.balances(t.token, [self.payer])
        if balance is None:
            raise ChainUnavailable("the payer's balance could not be read; try again")
        if balance < t.amount_raw:
            raise InsufficientBalance(
                "the payer holds less than one period of this token",
                {"balanceRaw": str(balance), "value": str(t.amount_raw)},
            )

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        await session.execute(
            update(SubscriptionCharge)
            .where(
                SubscriptionCharge.subscription_pk == self.subscription_pk,
                SubscriptionCharge.period == self.period,
            )
            .values(status=ChargeStatus.SUBMITTED, tx_hash=row.tx_hash, updated_at=row.created_at)
        )
