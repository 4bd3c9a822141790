"""Quoting a fiat price on a fake chain: a pegged token converts one to one, rounded up; the
native coin is priced by its feed, exactly and rounded up; a feed whose round is stale, not
positive or incomplete is refused (409 ``price_unavailable``), and an asset with neither a peg
nor a feed is refused (400 ``unpriced_currency``)."""

from __future__ import annotations

import asyncio
import dataclasses
from decimal import Decimal

import pytest

from invoicing.chain.config import NATIVE, FeedConfig
from invoicing.chain.fake import FakeChain
from invoicing.errors import ChainUnavailable, PriceUnavailable, UnpricedCurrency
from invoicing.pricing.quotes import CHAINLINK, PEG, feed_raw, pegged_raw, quote

NOW_S = 1_760_000_000
FEED = "0x00000000000000000000000000000000000000f1"
TOKEN = "0x00000000000000000000000000000000000000C0"


def priced_chain(heartbeat_s: int = 3600) -> FakeChain:
    chain = FakeChain()
    chain.add_token(TOKEN, 6, "TUSD")
    listed = tuple(dataclasses.replace(t, pegged="USD") for t in chain.config.tokens)
    chain.config = dataclasses.replace(
        chain.config, tokens=listed, feeds=(FeedConfig(NATIVE, "USD", FEED, heartbeat_s),)
    )
    return chain


async def test_a_pegged_token_converts_one_to_one() -> None:
    chain = priced_chain()
    found = await quote(chain, TOKEN, 6, "USD", "19.99", Decimal("19.99"), NOW_S * 1000)
    assert (found.required_raw, found.rate, found.source, found.feed) == (
        19_990_000,
        "1",
        PEG,
        None,
    )


def test_a_pegged_conversion_rounds_up_to_the_token_decimals() -> None:
    assert pegged_raw(Decimal("0.001"), 2) == 1  # 0.1 of a cent is owed as a whole cent
    assert pegged_raw(Decimal("1.005"), 2) == 101
    assert pegged_raw(Decimal("1.00"), 2) == 100


async def test_the_native_coin_is_priced_by_its_feed_and_the_round_is_kept() -> None:
    chain = priced_chain()
    chain.set_feed(FEED, 3_000_12345678, NOW_S - 60, round_id=77)
    found = await quote(chain, None, 18, "USD", "25.00", Decimal("25.00"), NOW_S * 1000)
    # 25 / 3000.12345678 ETH = 0.008333…; in wei, rounded up.
    assert found.required_raw == -(-25 * 10**18 * 10**8 // 3_000_12345678)
    assert found.required_raw * 3_000_12345678 >= 25 * 10**26  # never less than the price
    assert (found.required_raw - 1) * 3_000_12345678 < 25 * 10**26  # by less than one wei
    assert (found.rate, found.source, found.feed) == ("3000.12345678", CHAINLINK, FEED)
    assert (found.round_id, found.round_updated_at_ms) == (77, (NOW_S - 60) * 1000)


def test_a_feed_conversion_is_exact_when_it_divides() -> None:
    assert feed_raw(Decimal("30"), 3_000 * 10**8, 8, 18) == 10**16  # $30 at $3000 = 0.01 ETH


@pytest.mark.parametrize(
    ("answer", "updated_ago_s", "round_fields", "reason"),
    [
        (0, 60, {}, "not_positive"),
        (-5, 60, {}, "not_positive"),
        (3_000 * 10**8, 3601, {}, "stale"),
        (3_000 * 10**8, 60, {"started_at": 0}, "incomplete_round"),
        (3_000 * 10**8, 60, {"round_id": 9, "answered_in_round": 8}, "incomplete_round"),
    ],
)
async def test_an_unusable_round_is_refused(
    answer: int, updated_ago_s: int, round_fields: dict[str, int], reason: str
) -> None:
    chain = priced_chain()
    chain.set_feed(FEED, answer, NOW_S - updated_ago_s, **round_fields)
    with pytest.raises(PriceUnavailable) as refused:
        await quote(chain, None, 18, "USD", "25", Decimal(25), NOW_S * 1000)
    assert refused.value.status == 409
    assert refused.value.details is not None and refused.value.details["reason"] == reason
    assert refused.value.details["feed"] == FEED


async def test_a_round_exactly_one_heartbeat_old_still_prices() -> None:
    chain = priced_chain()
    chain.set_feed(FEED, 3_000 * 10**8, NOW_S - 3600)
    found = await quote(chain, None, 18, "USD", "30", Decimal(30), NOW_S * 1000)
    assert found.required_raw == 10**16


async def test_an_asset_without_peg_or_feed_in_that_currency_is_unpriced() -> None:
    chain = priced_chain()
    for token, currency in ((None, "EUR"), (TOKEN, "EUR")):
        with pytest.raises(UnpricedCurrency) as refused:
            await quote(chain, token, 18, currency, "1", Decimal(1), NOW_S * 1000)
        assert refused.value.status == 400 and refused.value.code == "unpriced_currency"
    assert chain.balance_calls == 0


async def test_concurrent_quotes_share_one_read_of_the_feed() -> None:
    chain = priced_chain()
    chain.set_feed(FEED, 3_000 * 10**8, NOW_S - 60)

    found = await asyncio.gather(
        *(quote(chain, None, 18, "USD", "30", Decimal(30), NOW_S * 1000) for _ in range(20))
    )

    assert {q.required_raw for q in found} == {10**16}
    assert chain.feed_reads <= 2  # the first alone, then the other 19 together
    await quote(chain, None, 18, "USD", "30", Decimal(30), NOW_S * 1000)
    assert chain.feed_reads <= 3  # a later quote reads again


async def test_a_feed_that_cannot_be_read_fails_only_its_quotes() -> None:
    chain = priced_chain()

    with pytest.raises(ChainUnavailable):
        await quote(chain, None, 18, "USD", "30", Decimal(30), NOW_S * 1000)
    chain.set_feed(FEED, 3_000 * 10**8, NOW_S - 60)
    assert (await quote(chain, None, 18, "USD", "30", Decimal(30), NOW_S * 1000)).rate == "3000"
