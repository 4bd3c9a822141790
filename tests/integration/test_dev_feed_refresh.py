"""``invoicing dev`` keeps its MockAggregator usable on anvil: a round half its heartbeat old
is posted again with the same answer (a broken answer with the dev feed's), a recent one is
left alone, and the command's hourly loop does the same."""

from __future__ import annotations

import asyncio
import time

import pytest

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.config import NATIVE, FeedConfig
from invoicing.chain.deploy import DEV_FEED_ANSWER, DevDeployment, refresh_dev_feed
from invoicing.chain.evm import EvmClient
from invoicing.chain.feeds import FeedRound, read_feed_round
from invoicing.cli.dev_feeds import (
    DEV_FEED_HEARTBEAT_S,
    DEV_FEED_KEEPER_KEY,
    DEV_FEED_REFRESH_AGE_S,
    keep_dev_feeds_fresh,
)
from tests.conftest import chain_config
from tests.support.feeds import USD_8, latest_round, set_answer, set_round

pytestmark = pytest.mark.integration

DAY_S = 86400


async def latest(evm: EvmClient, dev: DevDeployment) -> FeedRound:
    return await read_feed_round(evm, dev.chain_id, dev.aggregator, await evm.block_number())


async def mined_at(evm: EvmClient, tx_hash: str | None) -> int:
    """The timestamp of the block that mined ``tx_hash``: the chain's clock, which may stand a
    second behind the test's ``time.time()``."""
    assert tx_hash is not None
    receipt = await evm.get_receipt(tx_hash)
    assert receipt is not None
    return int((await evm.get_block(receipt["blockNumber"]))["timestamp"], 16)


async def test_a_round_half_its_heartbeat_old_is_posted_again_and_a_recent_one_kept(
    dev: DevDeployment, evm: EvmClient
) -> None:
    now_s = int(time.time())
    old = await latest_round(evm, dev) + 1
    await set_round(evm, dev, old, 2_345 * USD_8, now_s - 4 * DAY_S, now_s - 4 * DAY_S, old)

    posted = await refresh_dev_feed(
        evm, DEV_FEED_KEEPER_KEY, dev.aggregator, DEV_FEED_REFRESH_AGE_S, now_s
    )
    fresh = await latest(evm, dev)
    again = await refresh_dev_feed(
        evm, DEV_FEED_KEEPER_KEY, dev.aggregator, DEV_FEED_REFRESH_AGE_S, now_s
    )
    # A round of three days is kept; a non-positive stale one gets the dev feed's answer.
    await set_round(evm, dev, old + 2, 2_000 * USD_8, now_s - 3 * DAY_S, now_s - 3 * DAY_S, old + 2)
    kept = await refresh_dev_feed(
        evm, DEV_FEED_KEEPER_KEY, dev.aggregator, DEV_FEED_REFRESH_AGE_S, now_s
    )
    await set_round(evm, dev, old + 3, 0, now_s - 8 * DAY_S, now_s - 8 * DAY_S, old + 3)
    broken = await refresh_dev_feed(
        evm, DEV_FEED_KEEPER_KEY, dev.aggregator, DEV_FEED_REFRESH_AGE_S, now_s
    )
    mended = await latest(evm, dev)

    assert DEV_FEED_REFRESH_AGE_S == DEV_FEED_HEARTBEAT_S // 2 == 302_400
    assert posted is not None and again is None and kept is None and broken is not None
    assert (fresh.round_id, fresh.answer, fresh.answered_in_round) == (
        old + 1,
        2_345 * USD_8,
        old + 1,
    )
    assert fresh.updated_at == fresh.started_at == await mined_at(evm, posted)
    assert abs(fresh.updated_at - now_s) < 120
    assert (mended.round_id, mended.answer) == (old + 4, DEV_FEED_ANSWER)
    assert mended.updated_at == await mined_at(evm, broken)


async def test_the_dev_commands_loop_posts_a_stale_feed_again(
    anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient
) -> None:
    now_s = int(time.time())
    old = await latest_round(evm, dev) + 1
    await set_round(evm, dev, old, 1_500 * USD_8, now_s - 6 * DAY_S, now_s - 6 * DAY_S, old)
    feed = FeedConfig(NATIVE, "USD", dev.aggregator, DEV_FEED_HEARTBEAT_S)
    chain = chain_config(anvil, dev, feeds=(feed,))

    loop = asyncio.create_task(keep_dev_feeds_fresh([chain], 0.05))
    try:
        deadline = time.monotonic() + 30
        while (found := await latest(evm, dev)).round_id == old:
            assert time.monotonic() < deadline, "the loop did not post the feed again"
            await asyncio.sleep(0.05)
    finally:
        loop.cancel()
        await set_answer(evm, dev, DEV_FEED_ANSWER)

    assert (found.round_id, found.answer) == (old + 1, 1_500 * USD_8)
    assert now_s - found.updated_at < 120
