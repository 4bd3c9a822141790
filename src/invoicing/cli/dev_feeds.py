"""``invoicing dev``'s price feeds kept usable: the MockAggregator on each dev chain has its
answer posted again, unchanged, once it is half its heartbeat old, at start-up (a node given
with ``--rpc-url`` may have run for weeks) and every ``DEV_FEED_CHECK_S`` while the command
runs; without it a quote would find the feed stale after ``DEV_FEED_HEARTBEAT_S``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import refresh_dev_feed
from invoicing.chain.evm import EvmClient

log = logging.getLogger(__name__)

# The dev feed's answer is set at deployment and then by hand, or again by this command when
# it is half this old (a real feed's heartbeat is its published one).
DEV_FEED_HEARTBEAT_S = 7 * 86400
DEV_FEED_REFRESH_AGE_S = DEV_FEED_HEARTBEAT_S // 2
DEV_FEED_CHECK_S = 3600
# Who posts the dev feed's answer again: anvil's last account, never the relayer (account 0),
# whose nonces the relayer keeps.
DEV_FEED_KEEPER_KEY = DEV_PRIVATE_KEYS[-1]


async def refresh_feed(evm: EvmClient, aggregator: str) -> None:
    tx_hash = await refresh_dev_feed(
        evm, DEV_FEED_KEEPER_KEY, aggregator, DEV_FEED_REFRESH_AGE_S, int(time.time())
    )
    if tx_hash is not None:
        log.info("dev price feed %s posted again (%s)", aggregator, tx_hash)


async def keep_dev_feeds_fresh(chains: Sequence[ChainConfig], every_s: float) -> None:
    """While the command runs, every ``every_s``: each chain's dev feed posted again once it
    is half its heartbeat old (a failure is logged and tried again next time)."""
    while True:
        await asyncio.sleep(every_s)
        for chain in chains:
            evm = EvmClient.connect(chain.rpc_url)
            try:
                for feed in chain.feeds:
                    await refresh_feed(evm, feed.address)
            except Exception:  # noqa: BLE001 - a dev chain that is down now may be back later
                log.warning("dev price feed of chain %s not refreshed", chain.chain_id)
            finally:
                await evm.aclose()
