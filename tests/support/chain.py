"""Reading contracts on the test chain through their shipped ABI."""

from __future__ import annotations

from typing import Any

from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.evm import EvmClient


async def read_view(evm: EvmClient, to: str, contract: str, name: str, *args: Any) -> Any:
    """The answer of view function ``name`` of ``contract`` (an artifact name) at ``to``."""
    return decode_result(contract, name, await evm.eth_call(to, encode_call(contract, name, *args)))
