"""A payer's EIP-2612 ``permit`` giving the Subscriptions contract its allowance, relayed
before the first charge through the payment seam (``payments.seam``), so the payer spends
no gas on an ``approve`` (docs/integration/subscriptions.md#permit).

The payer signs, in the token's EIP-712 domain (the one configured for the token, as for
gasless payments), ``Permit(owner, spender, value, nonce, deadline)``: owner the payer,
spender the contract, value at least one period's amount, nonce the token's ``nonces(owner)``.
Checks before anything is sent, each refusal 400 with nothing sent:

1. the token signs permits under a known domain and answers ``nonces`` (``gasless_unavailable``);
2. ``owner`` and ``spender``, when given, are the payer and the contract; ``value`` covers one
   period; ``deadline`` is in the future (``invalid_authorization`` with ``details.field``);
3. the seam: the owner's opt-in, once-only (the key is (chain, token, payer, the permit's
   nonce in the token's space)), whose share pays, the signature (the payer's key: a token's
   permit takes no EIP-1271), the nonce is the token's current one, the simulation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import address_bytes, normalize_address
from invoicing.chain.answers import ContractRevert
from invoicing.chain.config import Eip712Domain
from invoicing.chain.eip712 import DOMAIN_FIELDS
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
)
from invoicing.hashing import keccak256
from invoicing.payments.seam import AuthorizationKey, Relayed, dry_run, relay_payment
from invoicing.payments.subscriptions.models import Subscription, SubscriptionStatus
from invoicing.payments.subscriptions.periods import authorize
from invoicing.payments.subscriptions.service import find_subscription, terms_of
from invoicing.payments.subscriptions.terms import Terms
from invoicing.services import Services
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import (
    NonceTaken,
    SignedRequest,
    parse_signature,
    recover_signer,
)
from invoicing.tables.settlement import RelayerTransaction, TxPurpose

PERMIT_FIELDS = [
    {"name": "owner", "type": "address"},
    {"name": "spender", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]
PERMIT_SELECTOR = keccak256(b"permit(address,address,uint256,uint256,uint8,bytes32,bytes32)")[:4]
ECDSA_SIGNATURE_BYTES = 65
# How long the authorization waits for its relayed permit to be mined before answering 503
# (the same body posted again then finds the permit carried and goes on).
PERMIT_WAIT_S = 30.0
PERMIT_POLL_S = 0.25


@dataclass(frozen=True)
class Permit:
    """The ``permit`` of a subscription's authorization, as posted (addresses checksummed)."""

    value: int
    deadline: int  # seconds
    signature: str
    owner: str | None = None
    spender: str | None = None


def permit_typed_data(
    domain: Eip712Domain, chain_id: int, token: str, message: dict[str, Any]
) -> dict[str, Any]:
    """The EIP-712 document of an EIP-2612 ``Permit`` (what wallets sign)."""
    return {
        "types": {"EIP712Domain": list(DOMAIN_FIELDS), "Permit": list(PERMIT_FIELDS)},
        "primaryType": "Permit",
        "domain": {
            "name": domain.name,
            "version": domain.version,
            "chainId": chain_id,
            "verifyingContract": normalize_address(token),
        },
        "message": message,
    }


def permit_domain(chain: ChainGateway, token: str) -> Eip712Domain | None:
    """The token's EIP-712 domain when the service knows it (the page offers a permit)."""
    config = chain.config.token(token)
    return None if config is None else config.eip3009


@dataclass(frozen=True)
class PermitRelay:
    """The payer's permit for ``terms``' contract, as the seam carries it."""

    request: SignedRequest  # nonce: the key's (token and permit nonce hashed)
    terms: Terms
    domain: Eip712Domain
    permit_nonce: int
    permit_value: int
    method: str = "subscriptions"

    @property
    def key(self) -> AuthorizationKey:
        r = self.request
        return AuthorizationKey(r.chain_id, self.terms.token, r.signer_address, f"0x{r.nonce:064x}")

    @property
    def value(self) -> int:
        return self.permit_value

    @property
    def owner_address(self) -> str:
        return self.terms.owner

    def typed_data(self, deadline: int) -> dict[str, Any]:
        message = {
            "owner": self.request.signer_address,
            "spender": self.terms.contract,
            "value": self.permit_value,
            "nonce": self.permit_nonce,
            "deadline": deadline,
        }
        return permit_typed_data(self.domain, self.terms.chain_id, self.terms.token, message)

    def call(self, deadline: int, signature: bytes) -> Call:
        v = signature[64] if len(signature) == ECDSA_SIGNATURE_BYTES else 0
        args = (
            self.request.signer_address,
            self.terms.contract,
            self.permit_value,
            deadline,
            v,
            signature[:32].rjust(32, b"\0"),
            signature[32:64].rjust(32, b"\0"),
        )
        data = PERMIT_SELECTOR + encode(
            ["address", "address", "uint256", "uint256", "uint8", "bytes32", "bytes32"], args
        )
        return Call(TxPurpose.SUBSCRIPTION_PERMIT, self.terms.token, data)

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        current = await chain.permit_nonce(self.terms.token, self.request.signer_address)
        if current == self.permit_nonce:
            return None
        error = AuthorizationUsed(
            "the permit's nonce is not the payer's current one at the token",
            {"field": "permit", "expected": str(current)},
        )
        return NonceTaken(error, maybe_ours=current is not None and self.permit_nonce < current)

    def revert_error(self, exc: ContractRevert) -> Exception:
        reason = decode_revert(exc.revert_data)
        name = None if reason is None else reason.name
        return InvalidAuthorization(
            "the token refuses this permit in simulation",
            {"field": "permit", "reason": str(name or "reverted")},
        )

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        return None

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        return None


async def permit_of(chain: ChainGateway, terms: Terms, payer: str, permit: Permit) -> PermitRelay:
    """Checks 1 and 2 (nothing sent): the seam's purpose for ``payer``'s ``permit``."""
    domain = permit_domain(chain, terms.token)
    nonce = None if domain is None else await chain.permit_nonce(terms.token, payer)
    if domain is None or nonce is None:
        raise GaslessUnavailable(
            "this subscription's token takes no permit: approve the contract instead",
            {"field": "permit"},
        )
    check_permit_fields(terms, payer, permit)
    key_nonce = int.from_bytes(
        keccak256(address_bytes(terms.token) + nonce.to_bytes(32, "big")), "big"
    )
    request = SignedRequest(terms.chain_id, payer, key_nonce, permit.deadline, permit.signature)
    return PermitRelay(request, terms, domain, nonce, permit.value)


def check_permit_fields(terms: Terms, payer: str, permit: Permit) -> None:
    if permit.owner is not None and normalize_address(permit.owner) != payer:
        raise InvalidAuthorization(
            "permit.owner must be the payer", {"field": "permit.owner", "expected": payer}
        )
    if permit.spender is not None and normalize_address(permit.spender) != terms.contract:
        raise InvalidAuthorization(
            "permit.spender must be the subscriptions contract",
            {"field": "permit.spender", "expected": terms.contract},
        )
    if not terms.amount_raw <= permit.value < 2**256:
        raise InvalidAuthorization(
            "permit.value must cover one period and fit a uint256",
            {"field": "permit.value", "min": str(terms.amount_raw)},
        )
    try:
        raw = parse_signature(permit.signature)
    except InvalidOwnerSignature:
        raw = b""
    if len(raw) != ECDSA_SIGNATURE_BYTES:
        raise InvalidAuthorization(
            "permit.signature must be 65 bytes of hex (r, s, v): a token's permit is signed by "
            "the payer's key",
            {"field": "permit.signature"},
        )


async def relay_permit(services: Services, chain: ChainGateway, purpose: PermitRelay) -> Relayed:
    """Check 3 and the send: the seam carries the permit (once however often it is posted)."""
    try:
        return await relay_payment(services, chain, purpose)
    except InvalidOwnerSignature as exc:
        raise InvalidAuthorization(
            "permit.signature is not the payer's Permit for the subscriptions contract",
            {"field": "permit.signature"},
        ) from exc
    except DeadlineExpired as exc:
        raise InvalidAuthorization(
            "permit.deadline has passed", {"field": "permit.deadline"}
        ) from exc


async def authorize_with_permit(
    services: Services, subscription_pk: str, signature: str, payer: str | None, permit: Permit
) -> Subscription:
    """The payer's authorization with its permit: the permit is relayed first (when the
    contract's allowance does not cover a period yet), then ``periods.authorize``."""
    sub = await find_subscription(services.db, subscription_pk)
    if sub.status == SubscriptionStatus.AWAITING_AUTHORIZATION:
        terms = terms_of(sub)
        signer = _signer(terms, signature, payer)
        chain = services.chains.get(sub.chain_id)
        purpose = await permit_of(chain, terms, signer, permit)
        if await chain.allowance(terms.token, signer, terms.contract) < terms.amount_raw:
            await _check_permit(services, chain, purpose)
            await relay_permit(services, chain, purpose)
            await _allowance_seen(chain, terms, signer)
    return await authorize(services, subscription_pk, signature, payer)


def _signer(terms: Terms, signature: str, payer: str | None) -> str:
    """The EOA that signed the subscription (a permit is signed by a key, never a wallet)."""
    try:
        signer = recover_signer(terms.typed_data(), parse_signature(signature))
    except InvalidOwnerSignature:
        signer = None
    if signer is None or (payer is not None and normalize_address(payer) != signer):
        raise InvalidAuthorization(
            "the signature is not the payer's key's signature of the subscription (a permit "
            "needs one)",
            {"field": "signature"},
        )
    return signer


async def _check_permit(services: Services, chain: ChainGateway, purpose: PermitRelay) -> None:
    """The seam's checks with nothing sent, then the payer's balance: a permit is relayed
    only when the first charge can follow it."""
    try:
        await dry_run(services, chain, purpose)
    except InvalidOwnerSignature as exc:
        raise InvalidAuthorization(
            "permit.signature is not the payer's Permit for the subscriptions contract",
            {"field": "permit.signature"},
        ) from exc
    except DeadlineExpired as exc:
        raise InvalidAuthorization(
            "permit.deadline has passed", {"field": "permit.deadline"}
        ) from exc
    terms = purpose.terms
    (balance,) = await chain.balances(terms.token, [purpose.request.signer_address])
    if balance is None:
        raise ChainUnavailable("the payer's balance could not be read; try again")
    if balance < terms.amount_raw:
        raise InsufficientBalance(
            "the payer holds less than one period of this token",
            {"balanceRaw": str(balance), "value": str(terms.amount_raw)},
        )


async def _allowance_seen(chain: ChainGateway, terms: Terms, payer: str) -> None:
    """Wait (bounded) until the relayed permit's allowance shows at the latest block."""
    for _ in range(int(PERMIT_WAIT_S / PERMIT_POLL_S)):
        if await chain.allowance(terms.token, payer, terms.contract) >= terms.amount_raw:
            return
        await asyncio.sleep(PERMIT_POLL_S)
    raise ChainUnavailable(
        "the permit is sent and not mined yet: post the same authorization again shortly",
        {"field": "permit"},
    )
