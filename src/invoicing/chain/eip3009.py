"""EIP-3009 ``transferWithAuthorization`` of a token: the typed data a payer signs, the
token's domain separator, and the calls the service makes (https://eips.ethereum.org/EIPS/eip-3009).

A token marked with EIP-3009 in the chains file or registry (``TokenConfig.eip3009``) signs
under the EIP-712 domain ``{name, version, chainId, verifyingContract: the token}``; start-up
compares :func:`domain_separator` with the token's ``DOMAIN_SEPARATOR()``.

``transferWithAuthorization`` is overloaded: every EIP-3009 token takes ``v, r, s``; USDC
v2.2 and the dev token also take ``bytes signature`` (ECDSA, or EIP-1271 for a contract
wallet). A 65-byte signature is sent as ``v, r, s`` (every version), anything else as bytes.
The selectors are written out here (the shipped ABI helpers refuse overloads);
``tests/unit/test_eip3009.py`` pins them to the dev token's ABI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode

from invoicing.addresses import normalize_address
from invoicing.chain.config import Eip712Domain
from invoicing.hashing import keccak256

TRANSFER_WITH_AUTHORIZATION = "TransferWithAuthorization"
TRANSFER_FIELDS = [
    {"name": "from", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"},
    {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]
_DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
_DOMAIN_TYPEHASH = keccak256(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
_ARGS = "address,address,uint256,uint256,uint256,bytes32"
TRANSFER_VRS_SELECTOR = keccak256(
    f"transferWithAuthorization({_ARGS},uint8,bytes32,bytes32)".encode()
)[:4]
TRANSFER_BYTES_SELECTOR = keccak256(f"transferWithAuthorization({_ARGS},bytes)".encode())[:4]
AUTHORIZATION_STATE_SELECTOR = keccak256(b"authorizationState(address,bytes32)")[:4]
DOMAIN_SEPARATOR_SELECTOR = keccak256(b"DOMAIN_SEPARATOR()")[:4]
BALANCE_OF_SELECTOR = keccak256(b"balanceOf(address)")[:4]
ECDSA_SIGNATURE_BYTES = 65


@dataclass(frozen=True)
class Authorization:
    """A ``TransferWithAuthorization`` message (addresses checksummed, the nonce 32 bytes)."""

    from_address: str
    to_address: str
    value: int
    valid_after: int
    valid_before: int
    nonce: bytes

    def message(self) -> dict[str, Any]:
        return {
            "from": self.from_address,
            "to": self.to_address,
            "value": self.value,
            "validAfter": self.valid_after,
            "validBefore": self.valid_before,
            "nonce": "0x" + self.nonce.hex(),
        }


def transfer_typed_data(
    domain: Eip712Domain, chain_id: int, token: str, authorization: Authorization
) -> dict[str, Any]:
    """Full EIP-712 typed data of ``authorization`` for eth-account (and what wallets sign)."""
    return {
        "types": {
            "EIP712Domain": list(_DOMAIN_FIELDS),
            TRANSFER_WITH_AUTHORIZATION: list(TRANSFER_FIELDS),
        },
        "primaryType": TRANSFER_WITH_AUTHORIZATION,
        "domain": {
            "name": domain.name,
            "version": domain.version,
            "chainId": chain_id,
            "verifyingContract": normalize_address(token),
        },
        "message": authorization.message(),
    }


def domain_separator(domain: Eip712Domain, chain_id: int, token: str) -> bytes:
    """The token's EIP-712 domain separator for ``domain`` on ``chain_id``."""
    return keccak256(
        encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [
                _DOMAIN_TYPEHASH,
                keccak256(domain.name.encode()),
                keccak256(domain.version.encode()),
                chain_id,
                normalize_address(token),
            ],
        )
    )


def encode_transfer_with_authorization(authorization: Authorization, signature: bytes) -> bytes:
    """Calldata of ``transferWithAuthorization``: ``v, r, s`` for a 65-byte signature, the
    ``bytes`` overload otherwise (a contract wallet's EIP-1271 signature)."""
    a = authorization
    head = [a.from_address, a.to_address, a.value, a.valid_after, a.valid_before, a.nonce]
    types = ["address", "address", "uint256", "uint256", "uint256", "bytes32"]
    if len(signature) == ECDSA_SIGNATURE_BYTES:
        v, r, s = signature[64], signature[:32], signature[32:64]
        args = [*head, v, r, s]
        return TRANSFER_VRS_SELECTOR + encode([*types, "uint8", "bytes32", "bytes32"], args)
    return TRANSFER_BYTES_SELECTOR + encode([*types, "bytes"], [*head, signature])


def encode_authorization_state(authorizer: str, nonce: bytes) -> bytes:
    """Calldata of ``authorizationState(authorizer, nonce)`` (true: used or canceled)."""
    return AUTHORIZATION_STATE_SELECTOR + encode(["address", "bytes32"], [authorizer, nonce])


def encode_balance_of(holder: str) -> bytes:
    return BALANCE_OF_SELECTOR + encode(["address"], [holder])
