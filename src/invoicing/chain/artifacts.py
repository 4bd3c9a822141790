"""The compiled contracts (ABI + bytecode), shipped inside the package.

``scripts/compile.mjs`` writes ``artifacts/<name>.json``; nothing at run time needs a
compiler. ``tests/integration/test_artifacts.py`` checks they match a fresh compile.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

PAYMENT_FACTORY = "PaymentFactory"
# The previous factory versions, kept for the escrows they made (``chain.versions``).
PAYMENT_FACTORY_V2 = "PaymentFactoryV2"
PAYMENT_FACTORY_V1 = "PaymentFactoryV1"
ESCROW = "Escrow"
# Reads many escrows in every asset in one eth_call (``chain.reader``).
ESCROW_READER = "EscrowReader"
# The reader's previous version, kept for the chains that hold it (``chain.reader_codec``).
ESCROW_READER_V1 = "EscrowReaderV1"
TEST_TOKEN = "TestToken"
# Charges each period of a payer's signed subscription into that period's invoice escrow.
SUBSCRIPTIONS = "Subscriptions"
# A price feed of development chains with a Chainlink aggregator's read interface.
MOCK_AGGREGATOR = "MockAggregator"
# TestToken is an OpenZeppelin ERC20: its ABI serves for the standard calls to any token.
ERC20 = TEST_TOKEN


@dataclass(frozen=True)
class Artifact:
    """One compiled contract: its ABI, creation code and runtime code, and the (start,
    length) byte ranges of the runtime code its constructor fills with immutables."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: bytes
    deployed_bytecode: bytes
    immutable_references: tuple[tuple[int, int], ...] = ()


@functools.cache
def load_artifact(name: str) -> Artifact:
    """Read ``artifacts/<name>.json`` from the installed package."""
    text = resources.files("invoicing.chain").joinpath("artifacts", f"{name}.json").read_text()
    raw = json.loads(text)
    return Artifact(
        name=raw["contractName"],
        abi=raw["abi"],
        bytecode=bytes.fromhex(raw["bytecode"][2:]),
        deployed_bytecode=bytes.fromhex(raw["deployedBytecode"][2:]),
        immutable_references=tuple(
            (int(ref["start"]), int(ref["length"])) for ref in raw.get("immutableReferences", [])
        ),
    )


def factory_bytecode() -> bytes:
    """Creation code of PaymentFactory (no constructor arguments)."""
    return load_artifact(PAYMENT_FACTORY).bytecode


def test_token_bytecode() -> bytes:
    """Creation code of the demo TestToken ("Test USD", TUSD, 6 decimals)."""
    return load_artifact(TEST_TOKEN).bytecode
