"""Escrow addresses, computed locally the way the factory's CREATE2 deploys them.

docs/architecture.md#escrows::

    create2_salt = keccak256(abi.encode(owner, salt))
    address      = keccak256(0xff ++ factory ++ create2_salt ++ keccak256(escrow_init_code))[12:]

Written out by hand because it runs on every invoice create;
``tests/integration/test_contracts.py`` checks it against the factory's ``predictEscrow``.
"""

from __future__ import annotations

import functools

from invoicing.addresses import address_bytes, checksum_encode
from invoicing.chain.artifacts import ESCROW, load_artifact
from invoicing.hashing import keccak256


def salt_bytes(salt: bytes) -> bytes:
    """The salt itself, refused unless it is exactly 32 bytes."""
    if len(salt) != 32:
        raise ValueError(f"escrow salt must be 32 bytes, got {len(salt)}")
    return salt


@functools.cache
def escrow_init_code_hash() -> bytes:
    """keccak256 of the one fixed Escrow init code (the same for every owner and token)."""
    return keccak256(load_artifact(ESCROW).bytecode)


def escrow_create2_salt(owner: str, salt: bytes) -> bytes:
    """The CREATE2 salt the factory uses: keccak256(abi.encode(owner, salt)).

    abi.encode of (address, bytes32) is the address left-padded to 32 bytes, then the salt."""
    return keccak256(bytes(12) + address_bytes(owner) + salt_bytes(salt))


def escrow_address(factory: str, owner: str, salt: bytes) -> str:
    """Checksummed escrow address of (owner, salt); equals the factory's predictEscrow."""
    return create2_address(address_bytes(factory), escrow_init_code_hash(), owner, salt)


def create2_address(factory: bytes, init_code_hash: bytes, owner: str, salt: bytes) -> str:
    """The escrow address from the factory's raw address and the init code hash (passed in,
    so the hot path does not re-hash the artifact)."""
    create2_salt = escrow_create2_salt(owner, salt)
    digest = keccak256(b"\xff" + factory + create2_salt + init_code_hash)
    return checksum_encode(digest[12:])
