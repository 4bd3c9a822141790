"""One pipeline for the requests someone signs and the relayer sends on their behalf.

Every signed request (an owner's SetFee, SetPayout or Refund) passes the same steps in this
order, and nothing reaches the chain when one fails:

1. the purpose's own checks, run by its domain before it hands the purpose over;
2. the deadline is in the future (seconds; a value over 10^12 is taken as milliseconds);
3. the EIP-712 signature recovers to the signer, or to the one address the purpose names as
   signing for it (an owner's refund delegate) (v 27/28, low s). A signature no EOA gives
   (not 65 bytes) from an address with code is left to EIP-1271: the simulation, under the
   relayer's gas cap, asks the wallet itself;
4. the nonce is the one to use now, or the request is an identical earlier one whose
   transaction is pending (mined maybe, not final yet): it gets that transaction back;
5. the purpose's checks against the current state (``before_relay``);
6. ``settlement.meta.relay_meta`` applies the relayer's spend rules and sends the call, the
   purpose's rows written with it under the relayer account lock (``on_hold``); a revert of
   the simulation becomes the purpose's error (``revert_error``).

The answer is an ``Accepted``: the transaction that carries the request.

A purpose supplies only what differs (``SignedPurpose``): its typed data and call, how its
nonce is read, what its target's reverts mean, and its own checks. ``FactoryPurpose`` holds
what the factory's meta-transactions share (``nonces(owner)`` and the factory's custom
errors); a purpose aimed at another contract (a token's EIP-3009
``transferWithAuthorization``: random nonces, the token's revert strings) answers
``nonce_taken`` and ``revert_error`` its own way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from eth_account import Account
from eth_account.messages import encode_typed_data
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import normalize_address
from invoicing.chain.answers import ContractRevert
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.errors import (
    DeadlineExpired,
    InvalidOwnerSignature,
    NonceMismatch,
    ServiceError,
)
from invoicing.services import Services
from invoicing.settlement.meta import MetaCall, dry_run_meta, pending_duplicate, relay_meta
from invoicing.settlement.relayer import Call
from invoicing.tables.settlement import RelayerTransaction

# A deadline above this is taken as milliseconds (10^12 s is ~31,700 years away).
MS_DEADLINE_THRESHOLD = 10**12
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
MAX_SIGNATURE_BYTES = 2048
ECDSA_SIGNATURE_BYTES = 65
_NOT_THE_SIGNER = "the EIP-712 signature does not recover to ownerAddress"


@dataclass(frozen=True)
class SignedRequest:
    """What every signed request carries (addresses checksummed)."""

    chain_id: int
    signer_address: str
    nonce: int
    deadline: int  # as sent; ``normalize_deadline`` gives the seconds that are signed
    signature: str
    # Who else may sign it for the signer: an owner's refund delegate, read from the factory
    # (``refunds.service``). The nonce, budget and answer stay the signer's.
    delegate: str | None = None


@dataclass(frozen=True)
class Accepted:
    """A relayed request: the transaction that carries it (the 202 answer)."""

    tx_hash: str
    chain_id: int
    signer_address: str
    nonce: int


@dataclass(frozen=True)
class NonceTaken:
    """The request's nonce is not the one to use now: ``error`` says so, unless
    ``maybe_ours`` and an identical request of ours is pending with it."""

    error: Exception
    maybe_ours: bool


class SignedPurpose(Protocol):
    """What one kind of signed request supplies to ``relay_signed``."""

    @property
    def request(self) -> SignedRequest: ...

    def typed_data(self, deadline: int) -> dict[str, Any]:
        """The EIP-712 message the signer signs, for ``deadline`` in seconds."""
        ...

    def call(self, deadline: int, signature: bytes) -> Call:
        """The call the relayer sends."""
        ...

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        """None when the request's nonce is the one to use now."""
        ...

    def revert_error(self, exc: ContractRevert) -> Exception:
        """The error for the call's simulation reverting."""
        ...

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        """The purpose's checks against the current state, once the request is signed and new."""
        ...

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        """The purpose's rows, written with the send under the relayer account lock (it may
        raise to abandon the send)."""
        ...


async def relay_signed(services: Services, chain: ChainGateway, purpose: SignedPurpose) -> Accepted:
    """Check and relay a signed request (steps 2-6 above); nothing is sent when a check fails."""
    request = purpose.request
    meta = await _signed_call(services, chain, purpose)
    taken = await purpose.nonce_taken(chain)
    if taken is not None:
        duplicate = await pending_duplicate(services, meta) if taken.maybe_ours else None
        if duplicate is None:
            raise taken.error
        return _accepted(request, duplicate)
    try:
        await purpose.before_relay(services, chain)
    except ServiceError:
        # The same request again while its transaction is pending: a node may not count it in
        # the nonce yet while already showing its effects (a refunded escrow's balance).
        duplicate = await pending_duplicate(services, meta)
        if duplicate is None:
            raise
        return _accepted(request, duplicate)
    try:
        row = await relay_meta(services, meta, on_hold=purpose.on_hold)
    except ContractRevert as exc:
        raise purpose.revert_error(exc) from exc
    return _accepted(request, row)


async def dry_run_signed(services: Services, chain: ChainGateway, purpose: SignedPurpose) -> None:
    """Steps 2-6 with nothing sent: what ``relay_signed`` would refuse is raised, the same
    error; the relayer's spend rules are read and the call simulated as the send would be.
    A request whose nonce is taken is refused, even by a pending identical one."""
    meta = await _signed_call(services, chain, purpose)
    taken = await purpose.nonce_taken(chain)
    if taken is not None:
        raise taken.error
    await purpose.before_relay(services, chain)
    try:
        await dry_run_meta(services, meta)
    except ContractRevert as exc:
        raise purpose.revert_error(exc) from exc


async def _signed_call(services: Services, chain: ChainGateway, purpose: SignedPurpose) -> MetaCall:
    """Steps 2 and 3: the deadline and the signature; the call the relayer would send."""
    request = purpose.request
    deadline = normalize_deadline(request.deadline)
    if deadline <= services.clock.now_ms() // 1000:
        raise DeadlineExpired("deadline has passed", {"deadline": str(deadline)})
    signature = parse_signature(request.signature)
    await check_signature(chain, purpose, deadline, signature)
    call = purpose.call(deadline, signature)
    return MetaCall(request.chain_id, request.signer_address, request.nonce, call)


def _accepted(request: SignedRequest, row: RelayerTransaction) -> Accepted:
    return Accepted(row.tx_hash, request.chain_id, request.signer_address, request.nonce)


def normalize_deadline(deadline: int) -> int:
    """Seconds; a value over 10^12 was given in milliseconds. The EIP-712 signature covers
    this value in seconds (the one relayed on-chain), whichever unit the request sent."""
    return deadline // 1000 if deadline > MS_DEADLINE_THRESHOLD else deadline


def parse_signature(signature: str) -> bytes:
    if not signature.startswith("0x") or len(signature) > 2 + 2 * MAX_SIGNATURE_BYTES:
        raise InvalidOwnerSignature("signature must be 0x-prefixed hex")
    try:
        return bytes.fromhex(signature[2:])
    except ValueError:
        raise InvalidOwnerSignature("signature must be 0x-prefixed hex") from None


def recover_signer(typed: dict[str, Any], signature: bytes) -> str | None:
    """The EOA that signed ``typed`` (v 27/28, low s, as the factory's ECDSA accepts), or None."""
    if len(signature) != ECDSA_SIGNATURE_BYTES:
        return None
    s = int.from_bytes(signature[32:64], "big")
    if signature[64] not in (27, 28) or not 0 < s <= SECP256K1_N // 2:
        return None
    try:
        signer = Account.recover_message(encode_typed_data(full_message=typed), signature=signature)
    except (ValueError, TypeError):  # eth-keys' BadSignature is a ValueError
        return None
    return normalize_address(str(signer))


async def check_signature(
    chain: ChainGateway, purpose: SignedPurpose, deadline: int, signature: bytes
) -> None:
    """Step 3: the signer signed the purpose's typed data for ``deadline`` (seconds)."""
    signer, delegate = purpose.request.signer_address, purpose.request.delegate
    recovered = recover_signer(purpose.typed_data(deadline), signature)
    if recovered is not None and recovered in (signer, delegate):
        return
    # A contract wallet signs by EIP-1271: the capped simulation asks the wallet itself.
    if len(signature) != ECDSA_SIGNATURE_BYTES:
        for wallet in (signer, delegate):
            if wallet is not None and await chain.has_code(wallet):
                return
    as_sent = purpose.request.deadline
    if as_sent != deadline and recover_signer(purpose.typed_data(as_sent), signature) == signer:
        raise InvalidOwnerSignature(
            "the signature covers the deadline in milliseconds; sign it in seconds (the value "
            "relayed on-chain)",
            {"signedDeadline": str(deadline)},
        )
    raise InvalidOwnerSignature(_NOT_THE_SIGNER)


@dataclass(frozen=True)
class FactoryPurpose(ABC):
    """What the factory's meta-transactions share: the signer's nonce is the factory's
    ``nonces(owner)``, and the factory's custom errors name a revert. Subclasses supply
    ``typed_data``, ``call`` and ``own_revert``, and may check more."""

    request: SignedRequest
    factory: str

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        expected = await chain.factory_nonce(self.request.signer_address, self.factory)
        if self.request.nonce == expected:
            return None
        error = NonceMismatch(
            "nonce is not the owner's current nonce; re-read it", {"expected": str(expected)}
        )
        return NonceTaken(error, maybe_ours=self.request.nonce < expected)

    def revert_error(self, exc: ContractRevert) -> Exception:
        name = revert_name(exc.revert_data)
        if name == "InvalidAccountNonce":
            return NonceMismatch(
                "nonce is not the owner's current nonce", {"expected": str(self.request.nonce)}
            )
        if name == "DeadlineExpired":
            return DeadlineExpired("deadline has passed")
        if name == "InvalidSignature":
            return InvalidOwnerSignature(_NOT_THE_SIGNER)
        return self.own_revert(name)

    @abstractmethod
    def typed_data(self, deadline: int) -> dict[str, Any]: ...

    @abstractmethod
    def call(self, deadline: int, signature: bytes) -> Call: ...

    @abstractmethod
    def own_revert(self, name: str | None) -> Exception:
        """The error for a revert the factory's meta-transactions do not share."""

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        return None

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        return None
