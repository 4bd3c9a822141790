"""Keccak-256, the one hash function of Ethereum (not the standardised SHA3-256).

Every keccak in the service goes through :func:`keccak256`: safe-pysha3's C function costs
about 1 µs a call where pycryptodome's wrapper costs about 8 µs, and several run per API
request (escrow addresses, EIP-55 checksums, signature recovery).
"""

from __future__ import annotations

from sha3 import keccak_256


def keccak256(data: bytes) -> bytes:
    """The 32-byte Keccak-256 digest of ``data``."""
    return bytes(keccak_256(data).digest())
