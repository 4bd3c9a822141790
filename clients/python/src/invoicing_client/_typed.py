"""The owner's EIP-712 messages the service relays: SetFee, SetPayout, SetRefundDelegate and
Refund.

Each is signed by the owner wallet and sent with the nonce it was signed at; the domain is
the factory's (``PaymentFactory``, version 1). See docs/integration/fees.md,
docs/integration/refunds.md and the API reference of ``POST
/integration/invoices/refund-meta``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eth_utils.address import to_checksum_address

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"

_DOMAIN_TYPE = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
_TYPES: dict[str, list[tuple[str, str]]] = {
    "SetFee": [("user", "address"), ("feeBps", "uint256")],
    "SetPayout": [("user", "address"), ("payout", "address")],
    "SetRefundDelegate": [("user", "address"), ("delegate", "address")],
    "Refund": [
        ("user", "address"),
        ("salt", "bytes32"),
        ("token", "address"),
        ("to", "address"),
        ("amount", "uint256"),
    ],
}


def typed_data(
    primary: str, chain_id: int, factory: str, message: Mapping[str, Any]
) -> dict[str, Any]:
    """Full typed data of one message; every message ends with ``nonce`` and ``deadline``."""
    fields = [*_TYPES[primary], ("nonce", "uint256"), ("deadline", "uint256")]
    return {
        "types": {
            "EIP712Domain": _DOMAIN_TYPE,
            primary: [{"name": name, "type": kind} for name, kind in fields],
        },
        "primaryType": primary,
        "domain": {
            "name": "PaymentFactory",
            "version": "1",
            "chainId": chain_id,
            "verifyingContract": to_checksum_address(factory),
        },
        "message": dict(message),
    }


def set_fee_typed_data(
    chain_id: int, factory: str, owner: str, fee_bps: int, nonce: int, deadline: int
) -> dict[str, Any]:
    """SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)."""
    message = {
        "user": to_checksum_address(owner),
        "feeBps": fee_bps,
        "nonce": nonce,
        "deadline": deadline,
    }
    return typed_data("SetFee", chain_id, factory, message)


def set_payout_typed_data(
    chain_id: int, factory: str, owner: str, payout: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """SetPayout(address user,address payout,uint256 nonce,uint256 deadline)."""
    message = {
        "user": to_checksum_address(owner),
        "payout": to_checksum_address(payout),
        "nonce": nonce,
        "deadline": deadline,
    }
    return typed_data("SetPayout", chain_id, factory, message)


def set_refund_delegate_typed_data(
    chain_id: int, factory: str, owner: str, delegate: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """SetRefundDelegate(address user,address delegate,uint256 nonce,uint256 deadline):
    ``delegate`` (the zero address revokes) may sign the owner's refunds."""
    message = {
        "user": to_checksum_address(owner),
        "delegate": to_checksum_address(delegate),
        "nonce": nonce,
        "deadline": deadline,
    }
    return typed_data("SetRefundDelegate", chain_id, factory, message)


def refund_typed_data(
    chain_id: int,
    factory: str,
    owner: str,
    salt: str,
    token: str | None,
    to: str,
    amount_raw: int,
    nonce: int,
    deadline: int,
) -> dict[str, Any]:
    """Refund(address user,bytes32 salt,address token,address to,uint256 amount,uint256 nonce,
    uint256 deadline): ``amount_raw`` of ``token`` (None: the native coin) from the escrow of
    ``salt`` to ``to``."""
    message = {
        "user": to_checksum_address(owner),
        "salt": salt,
        "token": to_checksum_address(token or ZERO_ADDRESS),
        "to": to_checksum_address(to),
        "amount": amount_raw,
        "nonce": nonce,
        "deadline": deadline,
    }
    return typed_data("Refund", chain_id, factory, message)
