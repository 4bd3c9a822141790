"""What the service knows of one chain: where its node is, which factory serves it, which
tokens it accepts and how the relayer may spend there (``ChainConfig``, ``TokenConfig``).

Built from the chains file (:mod:`invoicing.chain.chains_file`) or given inline, and held by
``Settings``; every part that talks to a chain reads its ``ChainConfig``. A relayer key is a
pydantic ``SecretStr``: no repr, log line or error shows it. RPC URLs are secrets too (a
provider's key often sits in the path or query): the repr leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from invoicing.addresses import normalize_address


@dataclass(frozen=True)
class TokenConfig:
    """An ERC-20 a chain accepts: its address, and the symbol and decimals the service uses
    (never read from the token on a request; startup checks the decimals once)."""

    address: str
    symbol: str
    decimals: int

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "address", normalize_address(self.address))
        except ValueError as exc:
            raise ValueError(f"token address {self.address!r} {exc}") from None
        if not 0 <= self.decimals <= 77:
            raise ValueError(f"token {self.address}: decimals must be 0..77")


@dataclass(frozen=True)
class ChainConfig:
    """One configured chain: where its node is, which factory serves it, which tokens it
    accepts (the allow-list) and the relayer's key."""

    chain_id: int
    name: str
    rpc_url: str = field(repr=False)
    factory: str
    confirmations: int = 1
    relayer_key: SecretStr | None = None
    native_symbol: str = "ETH"
    native_decimals: int = 18
    tokens: tuple[TokenConfig, ...] = ()
    # Base URL of the chain's block explorer (EIP-3091 paths: ``{explorer}/address/{addr}``),
    # or None; the payment page links the payment address there.
    explorer: str | None = None
    # Relayer spend (None: the global INVOICING_RELAYER_* default). Wei, raw units.
    max_fee_per_gas: int | None = None  # never pay more per gas, bumps included
    relayer_min_balance: int | None = None  # below it the chain is degraded, withdrawals wait
    # Every JSON-RPC URL of the chain, in order of preference (empty: just ``rpc_url``).
    rpc_urls: tuple[str, ...] = field(default=(), repr=False)
    # EIP-1559 fees (type-2 transactions) or legacy gasPrice (type 0); None: detected from
    # the latest block's baseFeePerGas.
    eip1559: bool | None = None
    # Factories (any known version) that made escrows on this chain before ``factory``: the
    # invoices they made are swept, refunded and exported through them (``chain.versions``).
    previous_factories: tuple[str, ...] = ()
    _by_address: dict[str, TokenConfig] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        key: Any = self.relayer_key
        if isinstance(key, str):  # callers that skipped the type: never keep it in clear
            object.__setattr__(self, "relayer_key", SecretStr(key))
        if self.explorer is not None:
            object.__setattr__(self, "explorer", _explorer_url(self.explorer))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "rpc_urls", tuple(self.rpc_urls) or (self.rpc_url,))
        previous = dict.fromkeys(normalize_address(f) for f in self.previous_factories)
        current = self.factory.lower()
        previous_factories = tuple(f for f in previous if f.lower() != current)
        object.__setattr__(self, "previous_factories", previous_factories)
        self._by_address.update({token.address.lower(): token for token in self.tokens})

    @property
    def factories(self) -> tuple[str, ...]:
        """Every factory that made escrows here, the current one first (checksummed)."""
        return (normalize_address(self.factory), *self.previous_factories)

    def explorer_address_url(self, address: str) -> str | None:
        """The explorer's page of ``address``, or None without an explorer."""
        return None if self.explorer is None else f"{self.explorer}/address/{address}"

    def token(self, address: str) -> TokenConfig | None:
        """The allow-listed token at ``address`` (any case), or None: no chain call."""
        return self._by_address.get(address.lower())

    def relayer_private_key(self) -> str | None:
        """The relayer key in clear, for signing only."""
        return None if self.relayer_key is None else self.relayer_key.get_secret_value()


def _explorer_url(url: str) -> str:
    """An explorer base URL: http(s) only (it becomes a link on the payment page), no
    whitespace or quotes; a trailing slash is dropped."""
    if not url.startswith(("https://", "http://")) or any(c in url for c in " \t\n\"'<>"):
        raise ValueError("explorer must be an http(s) URL")
    return url.rstrip("/")
