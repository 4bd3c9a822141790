"""What the domain needs from a chain, behind one interface (``ChainGateway``).

``EvmGateway`` talks to a real node through the factory contract; ``chain.fake.FakeChain``
ships beside it for unit tests.
"""

from __future__ import annotations

from typing import Protocol

from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.calldata import decode_balances_of, encode_balances_of
from invoicing.chain.escrows import create2_address
from invoicing.chain.evm import BlockRef, EvmClient
from invoicing.chain.rpc import ContractRevert, RpcError
from invoicing.errors import ChainUnavailable, UnsupportedChain, UnsupportedToken
from invoicing.settings import ChainConfig


def selector(signature: str) -> bytes:
    return bytes(function_signature_to_4byte_selector(signature))


def calldata(signature: str, types: list[str], values: list[object]) -> bytes:
    return selector(signature) + encode(types, values)


class ChainGateway(Protocol):
    config: ChainConfig

    async def block_number(self) -> int: ...

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int]:
        """Balances of many addresses in one call, all read at one block."""
        ...

    async def token_decimals(self, token: str) -> int:
        """ERC-20 decimals (cached); raises UnsupportedToken when it is not a token."""
        ...

    async def token_symbol(self, token: str | None) -> str: ...

    def escrow_address(self, owner: str, salt: bytes) -> str: ...

    async def factory_nonce(self, owner: str) -> int: ...

    async def fee_settings(self, owner: str) -> tuple[int, str | None]:
        """(feeBps, payout address or None) of an owner, read from the factory."""
        ...


def escrow_address_for(factory: str, init_code_hash: bytes, owner: str, salt: bytes) -> str:
    """CREATE2 address of an owner's escrow (the factory's ``predictEscrow``), with the init
    code hash passed in so the hot path does not re-hash the artifact."""
    return create2_address(bytes.fromhex(factory[2:]), init_code_hash, owner, salt)


class EvmGateway:
    """ChainGateway over JSON-RPC and the deployed PaymentFactory."""

    def __init__(self, config: ChainConfig, evm: EvmClient, init_code_hash: bytes) -> None:
        self.config = config
        self.evm = evm
        self.factory = to_checksum_address(config.factory)
        self._init_code_hash = init_code_hash
        self._decimals: dict[str, int] = {}
        self._symbols: dict[str, str] = {}

    async def aclose(self) -> None:
        await self.evm.aclose()

    async def block_number(self) -> int:
        return await self.evm.block_number()

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int]:
        if not addresses:
            return []
        data = encode_balances_of(token or ZERO_ADDRESS, addresses)
        try:
            raw = await self.evm.eth_call(self.factory, data, block)
        except RpcError as exc:
            raise ChainUnavailable(f"balance read failed on chain {self.config.chain_id}") from exc
        return decode_balances_of(raw)

    async def _read_token(self, token: str, signature: str, out: str) -> object:
        try:
            raw = await self.evm.eth_call(token, selector(signature))
            return decode([out], raw)[0]
        except (ContractRevert, RpcError, DecodingError, ValueError, OverflowError) as exc:
            raise UnsupportedToken(
                f"{token} is not a readable ERC-20 on chain {self.config.chain_id}"
            ) from exc

    async def token_decimals(self, token: str) -> int:
        key = token.lower()
        if key not in self._decimals:
            decimals = await self._read_token(token, "decimals()", "uint8")
            assert isinstance(decimals, int)
            self._decimals[key] = decimals
        return self._decimals[key]

    async def token_symbol(self, token: str | None) -> str:
        if token is None:
            return self.config.native_symbol
        key = token.lower()
        if key not in self._symbols:
            try:
                symbol = await self._read_token(token, "symbol()", "string")
                self._symbols[key] = str(symbol)[:32]
            except UnsupportedToken:
                self._symbols[key] = "TOKEN"
        return self._symbols[key]

    def escrow_address(self, owner: str, salt: bytes) -> str:
        return escrow_address_for(self.factory, self._init_code_hash, owner, salt)

    async def _factory_view(
        self, signature: str, types: list[str], values: list[object], out: str
    ) -> object:
        try:
            raw = await self.evm.eth_call(self.factory, calldata(signature, types, values))
        except RpcError as exc:
            raise ChainUnavailable(f"factory read failed on chain {self.config.chain_id}") from exc
        return decode([out], raw)[0]

    async def factory_nonce(self, owner: str) -> int:
        nonce = await self._factory_view("nonces(address)", ["address"], [owner], "uint256")
        assert isinstance(nonce, int)
        return nonce

    async def fee_settings(self, owner: str) -> tuple[int, str | None]:
        fee = await self._factory_view("feeBpsOf(address)", ["address"], [owner], "uint256")
        payout = await self._factory_view("payoutOf(address)", ["address"], [owner], "address")
        assert isinstance(fee, int) and isinstance(payout, str)
        zero = int(payout, 16) == 0
        return fee, None if zero else str(to_checksum_address(payout))


class ChainRegistry:
    """The configured chains, by chain id."""

    def __init__(self, gateways: dict[int, ChainGateway]) -> None:
        self._gateways = gateways

    def get(self, chain_id: int) -> ChainGateway:
        gateway = self._gateways.get(chain_id)
        if gateway is None:
            raise UnsupportedChain(f"chainId {chain_id} is not configured", {"chainId": chain_id})
        return gateway

    def all(self) -> list[ChainGateway]:
        return list(self._gateways.values())

    async def aclose(self) -> None:
        for gateway in self._gateways.values():
            close = getattr(gateway, "aclose", None)
            if close is not None:
                await close()
