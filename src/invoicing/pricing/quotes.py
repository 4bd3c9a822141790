"""Quoting a fiat price in the asset an invoice is paid in (docs/integration/pricing.md).

Two sources, tried in this order for the invoice's asset (the chain's native coin or an
allow-listed token) and currency:

- **peg**: the token is pegged to the currency in the registry (its issuer redeems it 1:1),
  so the amount converts one to one;
- **chainlink**: the chain's configuration names an aggregator for (asset, currency); its
  ``latestRoundData`` (read at one block with ``decimals``) gives how much of the currency one
  whole unit of the asset is worth. The round is refused (409 ``price_unavailable``) when
  its answer is not positive, the round is incomplete (``updatedAt`` or ``startedAt`` zero,
  ``answeredInRound`` behind ``roundId``), or it is older than the feed's heartbeat.

Neither: 400 ``unpriced_currency``. Every conversion is exact rational arithmetic on
integers and rounds **up** to the asset's smallest unit, so the payer never owes less than
the price.

Concurrent quotes of one process share their reads of a feed (a ``Coalescer`` per chain
gateway): a burst of creates costs one read per feed and batch, not one per invoice, and a
quote always waits for a read that starts after it arrived.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from invoicing.chain.feeds import FeedRound, round_problem
from invoicing.chain.gateway import ChainGateway
from invoicing.coalescer import Coalescer
from invoicing.errors import ChainUnavailable, InvalidRequest, PriceUnavailable, UnpricedCurrency

MAX_RAW = 2**256 - 1
PEG = "peg"
CHAINLINK = "chainlink"


@dataclass(frozen=True)
class Quote:
    """A fiat price locked into an asset amount: what the invoice keeps."""

    currency: str
    fiat_amount: str  # as the request gave it
    required_raw: int
    rate: str  # units of the currency one whole unit of the asset is worth, exact
    source: str  # PEG or CHAINLINK
    feed: str | None = None
    round_id: int | None = None
    round_updated_at_ms: int | None = None

    def row_values(self) -> dict[str, Any]:
        """What an invoice row keeps of the quote (``invoices.models``: its fiat columns)."""
        return {
            "currency": self.currency,
            "fiat_amount": self.fiat_amount,
            "rate": self.rate,
            "rate_source": self.source,
            "feed_address": self.feed,
            "feed_round_id": None if self.round_id is None else str(self.round_id),
            "feed_updated_at": self.round_updated_at_ms,
        }


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def pegged_raw(amount: Decimal, decimals: int) -> int:
    """``amount`` of the currency in a 1:1 token of ``decimals``, rounded up."""
    exact = Fraction(amount) * 10**decimals
    return ceil_div(exact.numerator, exact.denominator)


def feed_raw(amount: Decimal, answer: int, feed_decimals: int, decimals: int) -> int:
    """``amount`` of the currency in raw units of an asset worth ``answer / 10**feed_decimals``
    of it per whole unit, rounded up: amount × 10**decimals × 10**feed_decimals / answer."""
    exact = Fraction(amount) * 10**decimals * 10**feed_decimals / answer
    return ceil_div(exact.numerator, exact.denominator)


def feed_rate(answer: int, feed_decimals: int) -> str:
    whole, fraction = divmod(answer, 10**feed_decimals)
    if fraction == 0:
        return str(whole)
    return f"{whole}.{str(fraction).rjust(feed_decimals, '0').rstrip('0')}"


async def quote(
    chain: ChainGateway,
    token_address: str | None,
    decimals: int,
    currency: str,
    amount_text: str,
    amount: Decimal,
    now_ms: int,
) -> Quote:
    """Lock ``amount`` of ``currency`` into raw units of the invoice's asset."""
    found = await _quote(chain, token_address, decimals, currency, amount_text, amount, now_ms)
    if found.required_raw > MAX_RAW:
        raise InvalidRequest("amount is too large", {"field": "amount"})
    return found


async def _quote(
    chain: ChainGateway,
    token_address: str | None,
    decimals: int,
    currency: str,
    amount_text: str,
    amount: Decimal,
    now_ms: int,
) -> Quote:
    found = await asset_rate(chain, token_address, currency, now_ms)
    if found.source == PEG:
        return Quote(currency, amount_text, pegged_raw(amount, decimals), "1", PEG)
    assert found.round is not None  # a feed's rate has its round
    round_ = found.round
    return Quote(
        currency=currency,
        fiat_amount=amount_text,
        required_raw=feed_raw(amount, round_.answer, round_.decimals, decimals),
        rate=found.rate,
        source=CHAINLINK,
        feed=found.feed,
        round_id=round_.round_id,
        round_updated_at_ms=round_.updated_at * 1000,
    )


@dataclass(frozen=True)
class AssetRate:
    """How much of a currency one whole unit of an asset is worth now, and from where."""

    rate: str  # exact decimal string
    source: str  # PEG or CHAINLINK
    feed: str | None = None
    round: FeedRound | None = None


async def asset_rate(
    chain: ChainGateway, token_address: str | None, currency: str, now_ms: int
) -> AssetRate:
    """The rate of the asset in ``currency`` from the sources a quote uses, in their order:
    UnpricedCurrency without one, PriceUnavailable when the feed's round is unusable."""
    config = chain.config
    token = None if token_address is None else config.token(token_address)
    if token is not None and token.pegged == currency:
        return AssetRate("1", PEG)
    feed = config.feed(token_address, currency)
    if feed is None:
        raise UnpricedCurrency(
            f"{config.asset_symbol(token_address)} on chain {config.chain_id} has no price "
            f"in {currency}: no token pegged to it and no price feed",
            {"field": "currency", "currency": currency, "chainId": config.chain_id},
        )
    round_ = await _feed_reader(chain).submit(feed.address)
    reason = round_problem(round_, feed.heartbeat_s, now_ms // 1000)
    if reason is not None:
        raise PriceUnavailable(
            f"the price feed for {config.asset_symbol(token_address)} / {currency} cannot be "
            f"used now ({reason.replace('_', ' ')}); retry later",
            {
                "reason": reason,
                "feed": feed.address,
                "roundId": str(round_.round_id),
                "updatedAt": round_.updated_at * 1000,
            },
        )
    return AssetRate(feed_rate(round_.answer, round_.decimals), CHAINLINK, feed.address, round_)


# This process's feed readers, one per chain gateway (gone with it).
_READERS: weakref.WeakKeyDictionary[ChainGateway, Coalescer[str, FeedRound]] = (
    weakref.WeakKeyDictionary()
)


def _feed_reader(chain: ChainGateway) -> Coalescer[str, FeedRound]:
    reader = _READERS.get(chain)
    if reader is None:

        async def read(addresses: Sequence[str]) -> list[FeedRound | Exception]:
            rounds: dict[str, FeedRound | Exception] = {}
            for address in dict.fromkeys(addresses):
                try:
                    rounds[address] = await chain.feed_round(address)
                except ChainUnavailable as exc:
                    rounds[address] = exc
            return [rounds[address] for address in addresses]

        reader = _READERS[chain] = Coalescer(read)
    return reader
