"""Reading contracts on the test chain through their shipped ABI."""

from __future__ import annotations

from typing import Any

from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.evm import BlockRef, EvmClient
from invoicing.chain.rpc import JsonRpc
from invoicing.chain.rpc_body import HexData


async def read_view(evm: EvmClient, to: str, contract: str, name: str, *args: Any) -> Any:
    """The answer of view function ``name`` of ``contract`` (an artifact name) at ``to``."""
    return decode_result(contract, name, await evm.eth_call(to, encode_call(contract, name, *args)))


class CappedEvm(EvmClient):
    """An EvmClient whose eth_calls get at most ``cap`` gas, like a node with a low RPC gas
    cap, and that counts them."""

    def __init__(self, rpc: JsonRpc, cap: int) -> None:
        super().__init__(rpc)
        self.cap = cap
        self.calls = 0

    async def eth_call_text(
        self,
        to: str,
        data: bytes | HexData,
        block: BlockRef = "latest",
        from_: str | None = None,
        value: int = 0,
        gas: int | None = None,
    ) -> str:
        # Every eth_call goes through here (``eth_call`` decodes this one's answer).
        self.calls += 1
        capped = min(gas or self.cap, self.cap)
        return await super().eth_call_text(to, data, block, from_, value, capped)
