"""EVM addresses: the zero address, EIP-55 checksums and the one normalisation of input.

``checksum_encode`` is written out by hand on top of :func:`invoicing.hashing.keccak256`,
so the service hashes with one keccak; ``tests/unit/test_addresses.py`` pins it to
eth-utils' ``to_checksum_address``.
"""

from __future__ import annotations

import functools

from invoicing.hashing import keccak256

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def checksum_encode(address: bytes) -> str:
    """EIP-55 checksum of a 20-byte address: a hex digit is upper case where the matching
    nibble of keccak256(lowercase hex) is 8 or more."""
    hex_address = address.hex()
    hashed = keccak256(hex_address.encode()).hex()
    return "0x" + "".join(
        char.upper() if nibble >= "8" else char
        for char, nibble in zip(hex_address, hashed[:40], strict=True)
    )


@functools.lru_cache(maxsize=4096)
def normalize_address(text: str) -> str:
    """The EIP-55 form of ``0x`` followed by 40 hex digits, all lower or all upper case, or
    mixed case that is already a valid EIP-55 checksum (a mistyped pasted address is refused,
    not silently accepted). Cached: owners and escrows come back again and again.

    Raises ValueError for anything else (no prefix, another length, a non-hex digit, a
    wrong checksum); exceptions are not cached."""
    if len(text) != 42 or not text.startswith("0x") or not _HEX_DIGITS.issuperset(text[2:]):
        raise ValueError("must be a 0x-prefixed 20-byte hex address")
    checksummed = checksum_encode(bytes.fromhex(text[2:]))
    digits = text[2:]
    if digits != digits.lower() and digits != digits.upper() and text != checksummed:
        raise ValueError("has an invalid EIP-55 checksum")
    return checksummed


def address_bytes(address: str) -> bytes:
    """The 20 bytes of a hex address (``0x`` prefix optional, checksum case not verified)."""
    raw = bytes.fromhex(address[2:] if address.startswith(("0x", "0X")) else address)
    if len(raw) != 20:
        raise ValueError(f"not a 20-byte address: {address!r}")
    return raw
