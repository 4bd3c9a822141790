"""EIP-712 typed data of the owner messages the factory verifies: SetFee, SetPayout, Refund,
SetRefundDelegate.

The dicts are ``encode_typed_data(full_message=...)`` input for eth-account (the service
recovering a signer, tests signing) and match what wallets sign with ethers.js.
"""

from __future__ import annotations

from typing import Any

from invoicing.addresses import ZERO_ADDRESS, normalize_address

EIP712_NAME = "PaymentFactory"
EIP712_VERSION = "1"

# The EIP712Domain of a contract with a name and version (the factory's, Subscriptions').
DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
SET_FEE_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "feeBps", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]
SET_PAYOUT_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "payout", "type": "address"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]
SET_REFUND_DELEGATE_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "delegate", "type": "address"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]

REFUND_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "salt", "type": "bytes32"},
    {"name": "token", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "amount", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]


def _typed_data(
    primary_type: str,
    fields: list[dict[str, str]],
    chain_id: int,
    factory: str,
    message: dict[str, Any],
) -> dict[str, Any]:
    return {
        "types": {"EIP712Domain": list(DOMAIN_FIELDS), primary_type: list(fields)},
        "primaryType": primary_type,
        "domain": {
            "name": EIP712_NAME,
            "version": EIP712_VERSION,
            "chainId": chain_id,
            "verifyingContract": normalize_address(factory),
        },
        "message": message,
    }


def set_fee_typed_data(
    chain_id: int, factory: str, user: str, fee_bps: int, nonce: int, deadline: int
) -> dict[str, Any]:
    """Full EIP-712 typed data of SetFee."""
    message = {
        "user": normalize_address(user),
        "feeBps": fee_bps,
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("SetFee", SET_FEE_FIELDS, chain_id, factory, message)


def set_payout_typed_data(
    chain_id: int, factory: str, user: str, payout: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """Full EIP-712 typed data of SetPayout."""
    message = {
        "user": normalize_address(user),
        "payout": normalize_address(payout),
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("SetPayout", SET_PAYOUT_FIELDS, chain_id, factory, message)


def set_refund_delegate_typed_data(
    chain_id: int, factory: str, user: str, delegate: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """Full EIP-712 typed data of SetRefundDelegate (``delegate`` = the zero address revokes)."""
    message = {
        "user": normalize_address(user),
        "delegate": normalize_address(delegate),
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("SetRefundDelegate", SET_REFUND_DELEGATE_FIELDS, chain_id, factory, message)


def refund_typed_data(
    chain_id: int,
    factory: str,
    user: str,
    salt: bytes,
    token: str | None,
    to: str,
    amount: int,
    nonce: int,
    deadline: int,
) -> dict[str, Any]:
    """Full EIP-712 typed data of Refund: ``amount`` of ``token`` (None = native coin) from
    the escrow of ``salt`` to ``to``. The salt is given as ``0x`` + 64 hex digits."""
    if len(salt) != 32:
        raise ValueError(f"escrow salt must be 32 bytes, got {len(salt)}")
    message = {
        "user": normalize_address(user),
        "salt": "0x" + salt.hex(),
        "token": normalize_address(token or ZERO_ADDRESS),
        "to": normalize_address(to),
        "amount": amount,
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("Refund", REFUND_FIELDS, chain_id, factory, message)
