"""What the service knows of one chain: where its node is, which factory serves it, which
tokens it accepts, which price feeds it reads and how the relayer may spend there
(``ChainConfig``, ``TokenConfig``, ``FeedConfig``).

Built from the chains file (:mod:`invoicing.chain.chains_file`) or given inline, and held by
``Settings``; every part that talks to a chain reads its ``ChainConfig``. A relayer key is a
pydantic ``SecretStr``: no repr, log line or error shows it. RPC URLs are secrets too (a
provider's key often sits in the path or query): the repr leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from invoicing.addresses import normalize_address


@dataclass(frozen=True)
class Eip712Domain:
    """The name and version of a token's EIP-712 domain (the rest of the domain is the
    chain id and the token's address)."""

    name: str
    version: str


@dataclass(frozen=True)
class TokenConfig:
    """An ERC-20 a chain accepts: its address, and the symbol and decimals the service uses
    (never read from the token on a request; startup checks the decimals once).

    ``eip3009`` marks a token that implements EIP-3009 ``transferWithAuthorization``, with
    its EIP-712 domain (start-up checks it against the token's ``DOMAIN_SEPARATOR``); such a
    token can be paid without gas (``gasless``)."""

    address: str
    symbol: str
    decimals: int
    eip3009: Eip712Domain | None = None
    # The ISO 4217 currency the issuer redeems the token for one to one (``USD``), or None:
    # a fiat price in that currency converts 1:1 (docs/integration/pricing.md).
    pegged: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "address", normalize_address(self.address))
        except ValueError as exc:
            raise ValueError(f"token address {self.address!r} {exc}") from None
        if not 0 <= self.decimals <= 77:
            raise ValueError(f"token {self.address}: decimals must be 0..77")
        if self.pegged is not None:
            object.__setattr__(self, "pegged", _currency_code(self.pegged))


# A feed's ``asset`` that is the chain's native coin.
NATIVE = "native"
# A Chainlink feed's heartbeat when its entry gives none: the longest an answer may be old.
DEFAULT_HEARTBEAT_S = 3600


@dataclass(frozen=True)
class FeedConfig:
    """A Chainlink aggregator that prices one asset of the chain (``asset``: ``native`` or an
    allow-listed token's address) in one currency (``currency``, ISO 4217): its answer is
    how many units of the currency one whole unit of the asset is worth. An answer older
    than ``heartbeat_s`` is refused."""

    asset: str
    currency: str
    address: str
    heartbeat_s: int = DEFAULT_HEARTBEAT_S

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "address", normalize_address(self.address))
        except ValueError as exc:
            raise ValueError(f"feed address {self.address!r} {exc}") from None
        if self.asset != NATIVE:
            try:
                object.__setattr__(self, "asset", normalize_address(self.asset))
            except ValueError:
                raise ValueError(
                    f'feed asset {self.asset!r}: "native" or a token address'
                ) from None
        object.__setattr__(self, "currency", _currency_code(self.currency))
        if not 0 < self.heartbeat_s <= 7 * 86400:
            raise ValueError(f"feed {self.address}: heartbeat_s must be 1..604800")


def _currency_code(code: str) -> str:
    if not isinstance(code, str) or len(code) != 3 or not code.isascii() or not code.isalpha():
        raise ValueError(f"currency {code!r} is not a three-letter ISO 4217 code")
    return code.upper()


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
    # Chainlink aggregators pricing the chain's assets, at most one per (asset, currency).
    feeds: tuple[FeedConfig, ...] = ()
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
        object.__setattr__(self, "feeds", tuple(self.feeds))
        pairs = [(feed.asset, feed.currency) for feed in self.feeds]
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"chain {self.chain_id}: two feeds for one asset and currency")
        for feed in self.feeds:
            if feed.asset != NATIVE and self.token(feed.asset) is None:
                raise ValueError(
                    f"feed {feed.address}: asset {feed.asset} is not an allow-listed token"
                )

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

    def feed(self, token_address: str | None, currency: str) -> FeedConfig | None:
        """The feed pricing the native coin (``token_address`` None) or a token in
        ``currency``, or None."""
        asset = NATIVE if token_address is None else normalize_address(token_address)
        return next((f for f in self.feeds if f.asset == asset and f.currency == currency), None)

    def asset_symbol(self, token_address: str | None) -> str:
        """The symbol of the native coin or an allow-listed token (a feed's description
        names it: ``ETH / USD``)."""
        if token_address is None:
            return self.native_symbol
        token = self.token(token_address)
        return "TOKEN" if token is None else token.symbol

    def relayer_private_key(self) -> str | None:
        """The relayer key in clear, for signing only."""
        return None if self.relayer_key is None else self.relayer_key.get_secret_value()


def _explorer_url(url: str) -> str:
    """An explorer base URL: http(s) only (it becomes a link on the payment page), no
    whitespace or quotes; a trailing slash is dropped."""
    if not url.startswith(("https://", "http://")) or any(c in url for c in " \t\n\"'<>"):
        raise ValueError("explorer must be an http(s) URL")
    return url.rstrip("/")


def x402_tokens(chains: Iterable[ChainConfig]) -> frozenset[tuple[int, str]]:
    """(chain id, lower-case address) of every configured token with EIP-3009: invoices in
    them are x402 resources (``x402Url``)."""
    return frozenset(
        (chain.chain_id, token.address.lower())
        for chain in chains
        for token in chain.tokens
        if token.eip3009 is not None
    )
