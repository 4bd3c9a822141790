"""The configured chains' gateways, by chain id: the one place a chain id from a request
becomes a gateway, or ``unsupported_chain``."""

from __future__ import annotations

from invoicing.chain.config import x402_tokens
from invoicing.chain.gateway import ChainGateway
from invoicing.errors import UnsupportedChain


class ChainRegistry:
    """The configured chains, by chain id."""

    def __init__(self, gateways: dict[int, ChainGateway]) -> None:
        self._gateways = gateways
        self.x402_tokens = x402_tokens(gateway.config for gateway in gateways.values())

    def get(self, chain_id: int) -> ChainGateway:
        gateway = self._gateways.get(chain_id)
        if gateway is None:
            raise UnsupportedChain(f"chainId {chain_id} is not configured", {"chainId": chain_id})
        return gateway

    def all(self) -> list[ChainGateway]:
        return list(self._gateways.values())

    async def aclose(self) -> None:
        for gateway in self._gateways.values():
            await gateway.aclose()
