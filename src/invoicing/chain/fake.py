"""In-memory ChainGateway for unit tests: balances and token metadata set by hand."""

from __future__ import annotations

from invoicing.addresses import address_bytes
from invoicing.chain.escrows import create2_address
from invoicing.chain.evm import BlockRef
from invoicing.errors import ChainUnavailable, UnsupportedToken
from invoicing.hashing import keccak256
from invoicing.settings import ChainConfig

FAKE_FACTORY = "0x" + "fa" * 20


class FakeChain:
    def __init__(self, chain_id: int = 31337, confirmations: int = 1) -> None:
        self.config = ChainConfig(
            chain_id=chain_id,
            name="Fake chain",
            rpc_url="fake://",
            factory=FAKE_FACTORY,
            confirmations=confirmations,
        )
        self.block = 1
        self.native: dict[str, int] = {}
        self.tokens: dict[str, dict[str, int]] = {}
        self.decimals: dict[str, int] = {}
        self.symbols: dict[str, str] = {}
        self.nonces: dict[str, int] = {}
        self.fees: dict[str, tuple[int, str | None]] = {}
        self.available = True
        self.balance_calls = 0

    def add_token(self, token: str, decimals: int, symbol: str = "TKN") -> None:
        self.decimals[token.lower()] = decimals
        self.symbols[token.lower()] = symbol
        self.tokens[token.lower()] = {}

    def pay(self, address: str, amount: int, token: str | None = None) -> None:
        book = self.native if token is None else self.tokens[token.lower()]
        book[address.lower()] = book.get(address.lower(), 0) + amount

    def _check(self) -> None:
        if not self.available:
            raise ChainUnavailable("fake chain is down")

    async def block_number(self) -> int:
        self._check()
        return self.block

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int]:
        self._check()
        self.balance_calls += 1
        book = self.native if token is None else self.tokens.get(token.lower(), {})
        return [book.get(a.lower(), 0) for a in addresses]

    async def token_decimals(self, token: str) -> int:
        self._check()
        if token.lower() not in self.decimals:
            raise UnsupportedToken(f"{token} is not a readable ERC-20")
        return self.decimals[token.lower()]

    async def token_symbol(self, token: str | None) -> str:
        return "ETH" if token is None else self.symbols.get(token.lower(), "TOKEN")

    def escrow_address(self, owner: str, salt: bytes) -> str:
        return create2_address(address_bytes(FAKE_FACTORY), keccak256(b"fake-escrow"), owner, salt)

    async def factory_nonce(self, owner: str) -> int:
        self._check()
        return self.nonces.get(owner.lower(), 0)

    async def fee_settings(self, owner: str) -> tuple[int, str | None]:
        self._check()
        return self.fees.get(owner.lower(), (0, None))
