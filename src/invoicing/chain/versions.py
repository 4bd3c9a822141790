"""The factory versions the service knows, and which one made an escrow.

``PaymentFactory`` (version 3, ``contracts/PaymentFactory.sol``) is what ``invoicing deploy``
deploys: every native send carries a fixed gas stipend (since version 2), and every wei a
recipient refuses stays credited to it (version 3). ``PaymentFactoryV2`` and
``PaymentFactoryV1`` (``contracts/previous/``) are the versions before it, kept so that a
deployment that ran them keeps sweeping, refunding and exporting the escrows they made. All
make the same escrows (same ``Escrow`` init code); an escrow's address depends on the
factory's address, so the factory that made an invoice's escrow is found from its address
(:func:`escrow_factory`). A chain's ``ChainConfig.factory`` may be any version; its
``previous_factories`` list the others that made escrows there
(docs/operations/chains.md#upgrade-the-factory).
"""

from __future__ import annotations

from collections.abc import Sequence

from invoicing.addresses import address_bytes, normalize_address
from invoicing.chain.artifacts import (
    PAYMENT_FACTORY,
    PAYMENT_FACTORY_V1,
    PAYMENT_FACTORY_V2,
    Artifact,
    load_artifact,
)
from invoicing.chain.escrows import escrow_create2_salt, escrow_init_code_hash
from invoicing.hashing import keccak256

# Every known version, newest first.
FACTORY_VERSIONS = (PAYMENT_FACTORY, PAYMENT_FACTORY_V2, PAYMENT_FACTORY_V1)
# Where ``invoicing deploy`` put versions 2 and 1 on every chain (their deterministic
# addresses; tests/unit/test_deploy_address.py derives them from the artifacts). A chain file
# that leaves out ``previous_factories`` lists both, so a deployment that relied on the
# default address keeps its earlier escrows after each upgrade.
V2_FACTORY_ADDRESS = "0xb42818d00700C4639aC79C015df11B6000354BD2"
V1_FACTORY_ADDRESS = "0x59B9Eb4714deD441FBFCEBFE692b7Af0f336fDEE"
DEFAULT_PREVIOUS_FACTORIES = (V2_FACTORY_ADDRESS, V1_FACTORY_ADDRESS)


def same_runtime_code(code: bytes, artifact: Artifact) -> bool:
    """Whether deployed ``code`` is ``artifact``'s runtime code, immutables aside."""
    expected = artifact.deployed_bytecode
    if len(code) != len(expected):
        return False
    deployed, shipped = bytearray(code), bytearray(expected)
    for start, length in artifact.immutable_references:
        deployed[start : start + length] = bytes(length)
        shipped[start : start + length] = bytes(length)
    return deployed == shipped


def factory_version(code: bytes) -> str | None:
    """The artifact name of the known factory version whose runtime code ``code`` is."""
    for name in FACTORY_VERSIONS:
        if same_runtime_code(code, load_artifact(name)):
            return name
    return None


def escrow_factory(factories: Sequence[str], owner: str, salt: bytes, payment_address: str) -> str:
    """Which of ``factories`` (the chain's current one first) derives ``payment_address`` for
    (``owner``, ``salt``); the current one when none does (nothing else could sweep it)."""
    # Raw 20-byte addresses compared: no checksum to compute for each factory and invoice.
    create2_salt = escrow_create2_salt(owner, salt)
    init_code_hash = escrow_init_code_hash()
    wanted = bytes.fromhex(payment_address[2:])
    for factory in factories:
        digest = keccak256(b"\xff" + address_bytes(factory) + create2_salt + init_code_hash)
        if digest[12:] == wanted:
            return normalize_address(factory)
    return normalize_address(factories[0])
