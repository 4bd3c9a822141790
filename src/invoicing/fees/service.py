"""Owner fee settings: check an owner-signed SetFee/SetPayout, then relay it (DESIGN 5).

Checks run in a fixed order and nothing reaches the chain when one fails: feeBps <= 500,
deadline in the future, the EIP-712 signature recovers to the owner, nonce equals the
factory's ``nonces(owner)``; then ``settlement.meta.relay_meta`` answers a repeat with its
pending transaction, holds the owner's daily budget, simulates the call under the
meta-transaction gas cap and sends it from the relayer account.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data

from invoicing.addresses import normalize_address
from invoicing.chain.calldata import MAX_FEE_BPS, encode_set_fee_meta, encode_set_payout_meta
from invoicing.chain.eip712 import set_fee_typed_data, set_payout_typed_data
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.chain.rpc import ContractRevert
from invoicing.errors import (
    DeadlineExpired,
    FeeTooHigh,
    InvalidOwnerSignature,
    InvalidRequest,
    NonceMismatch,
)
from invoicing.services import Services
from invoicing.settlement.meta import MetaCall, pending_duplicate, relay_meta
from invoicing.settlement.models import RelayerTransaction, TxPurpose
from invoicing.settlement.relayer import Call

# A deadline above this is taken as milliseconds (10^12 s is ~31,700 years away).
MS_DEADLINE_THRESHOLD = 10**12
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
MAX_SIGNATURE_BYTES = 2048


@dataclass(frozen=True)
class MetaRequest:
    """A validated set-meta or set-payout-meta body (addresses checksummed)."""

    owner_address: str
    chain_id: int
    nonce: int
    deadline: int  # as sent; normalized by ``normalize_deadline``
    signature: str
    fee_bps: int | None = None  # SetFee
    payout_address: str | None = None  # SetPayout

    @property
    def purpose(self) -> str:
        return TxPurpose.SET_FEE if self.fee_bps is not None else TxPurpose.SET_PAYOUT


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


def typed_data(request: MetaRequest, factory: str, deadline: int) -> dict[str, Any]:
    owner = request.owner_address
    if request.fee_bps is not None:
        return set_fee_typed_data(
            request.chain_id, factory, owner, request.fee_bps, request.nonce, deadline
        )
    assert request.payout_address is not None
    return set_payout_typed_data(
        request.chain_id, factory, owner, request.payout_address, request.nonce, deadline
    )


def recover_signer(typed: dict[str, Any], signature: bytes) -> str | None:
    """The EOA that signed ``typed`` (v 27/28, low s, as the factory's ECDSA accepts), or None."""
    if len(signature) != 65:
        return None
    s = int.from_bytes(signature[32:64], "big")
    if signature[64] not in (27, 28) or not 0 < s <= SECP256K1_N // 2:
        return None
    try:
        signer = Account.recover_message(encode_typed_data(full_message=typed), signature=signature)
    except (ValueError, TypeError):  # eth-keys' BadSignature is a ValueError
        return None
    return normalize_address(str(signer))


async def check_signature(chain: ChainGateway, request: MetaRequest, typed: dict[str, Any]) -> None:
    signature = parse_signature(request.signature)
    if recover_signer(typed, signature) == request.owner_address:
        return
    # A contract wallet signs by EIP-1271: the simulation that follows asks the wallet itself.
    is_contract = await chain.has_code(request.owner_address)
    if len(signature) != 65 and is_contract:
        return
    deadline = typed["message"]["deadline"]
    if deadline != request.deadline and _signed_as_sent(request, typed, signature):
        raise InvalidOwnerSignature(
            "the signature covers the deadline in milliseconds; sign it in seconds (the value "
            "relayed on-chain)",
            {"signedDeadline": str(deadline)},
        )
    raise InvalidOwnerSignature("the EIP-712 signature does not recover to ownerAddress")


def _signed_as_sent(request: MetaRequest, typed: dict[str, Any], signature: bytes) -> bool:
    """Whether the owner signed the deadline as sent (milliseconds) instead of in seconds."""
    as_sent = {**typed, "message": {**typed["message"], "deadline": request.deadline}}
    return recover_signer(as_sent, signature) == request.owner_address


def meta_call(request: MetaRequest, factory: str, deadline: int) -> Call:
    signature = parse_signature(request.signature)
    owner = request.owner_address
    if request.fee_bps is not None:
        data = encode_set_fee_meta(owner, request.fee_bps, request.nonce, deadline, signature)
    else:
        assert request.payout_address is not None
        data = encode_set_payout_meta(
            owner, request.payout_address, request.nonce, deadline, signature
        )
    return Call(request.purpose, factory, data)


def _revert_to_error(exc: ContractRevert, expected_nonce: int) -> Exception:
    name = revert_name(exc.revert_data)
    if name == "InvalidAccountNonce":
        return NonceMismatch(
            "nonce is not the owner's current nonce", {"expected": str(expected_nonce)}
        )
    if name == "DeadlineExpired":
        return DeadlineExpired("deadline has passed")
    if name == "FeeTooHigh":
        return FeeTooHigh(f"feeBps must be at most {MAX_FEE_BPS}")
    if name == "InvalidSignature":
        return InvalidOwnerSignature("the EIP-712 signature does not recover to ownerAddress")
    return InvalidRequest(f"the factory rejects this call ({name or 'reverted'})")


async def submit_meta(services: Services, request: MetaRequest) -> dict[str, Any]:
    """Check and relay a SetFee/SetPayout (``settlement.meta`` bounds what it may spend);
    returns the 202 body."""
    chain = services.chains.get(request.chain_id)
    if request.fee_bps is not None and request.fee_bps > MAX_FEE_BPS:
        raise FeeTooHigh(f"feeBps must be at most {MAX_FEE_BPS}", {"max": MAX_FEE_BPS})
    deadline = normalize_deadline(request.deadline)
    if deadline <= services.clock.now_ms() // 1000:
        raise DeadlineExpired("deadline has passed", {"deadline": str(deadline)})
    factory = normalize_address(chain.config.factory)
    await check_signature(chain, request, typed_data(request, factory, deadline))
    meta = MetaCall(
        request.chain_id,
        request.owner_address,
        request.nonce,
        meta_call(request, factory, deadline),
    )
    expected = await chain.factory_nonce(request.owner_address)
    if request.nonce != expected:
        # Ours may be mined already and not final yet: the same request gets it back.
        duplicate = await pending_duplicate(services, meta) if request.nonce < expected else None
        if duplicate is None:
            raise NonceMismatch(
                "nonce is not the owner's current nonce; re-read it", {"expected": str(expected)}
            )
        return _accepted(request, duplicate)
    try:
        row = await relay_meta(services, meta)
    except ContractRevert as exc:
        raise _revert_to_error(exc, expected) from exc
    return _accepted(request, row)


def _accepted(request: MetaRequest, row: RelayerTransaction) -> dict[str, Any]:
    """The 202 body: the transaction that carries the request."""
    return {
        "txHash": row.tx_hash,
        "chainId": request.chain_id,
        "ownerAddress": request.owner_address,
        "nonce": str(request.nonce),
        "status": "submitted",
    }


async def fee_settings(services: Services, chain_id: int, owner_address: str) -> dict[str, Any]:
    """An owner's settings as the factory holds them: ``{feeBps, payoutAddress, nonce}``,
    and the ``factory`` (the EIP-712 verifyingContract a client signs SetFee/SetPayout for)."""
    chain = services.chains.get(chain_id)
    fee_bps, payout = await chain.fee_settings(owner_address)
    nonce = await chain.factory_nonce(owner_address)
    factory = normalize_address(chain.config.factory)
    return {"feeBps": fee_bps, "payoutAddress": payout, "nonce": str(nonce), "factory": factory}
