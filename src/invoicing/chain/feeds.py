"""Reading a Chainlink aggregator (``AggregatorV3Interface``): ``decimals()`` and
``latestRoundData()`` in one JSON-RPC batch, both at one block (docs/integration/pricing.md).

The round is returned as the feed answered it; :func:`round_problem` says whether it can
price anything (positive, complete, recent enough): ``pricing.quotes`` refuses an invoice
with it, and the start-up check (``chain.checks``) a feed.
``MockAggregator`` (contracts/dev) has the same read interface, so its ABI encodes the calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.exceptions import DecodingError

from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.answers import RpcError
from invoicing.chain.artifacts import MOCK_AGGREGATOR
from invoicing.chain.config import NATIVE, ChainConfig, FeedConfig
from invoicing.chain.evm import EvmClient
from invoicing.errors import ChainUnavailable

AGGREGATOR = MOCK_AGGREGATOR


@dataclass(frozen=True)
class FeedRound:
    """One ``latestRoundData`` answer of a feed, read at ``block``, with its ``decimals``."""

    address: str
    block: int
    decimals: int
    round_id: int
    answer: int
    started_at: int  # unix seconds
    updated_at: int  # unix seconds
    answered_in_round: int


_DECIMALS = "0x" + encode_call(AGGREGATOR, "decimals").hex()
_LATEST = "0x" + encode_call(AGGREGATOR, "latestRoundData").hex()


async def read_feed_round(evm: EvmClient, chain_id: int, address: str, block: int) -> FeedRound:
    """The feed's latest round at ``block``; ChainUnavailable when the node does not answer
    or the contract answers something that is not an aggregator's answer."""
    calls = [{"to": address, "data": data} for data in (_DECIMALS, _LATEST)]
    try:
        raw_decimals, raw_round = await evm.rpc.batch(
            [("eth_call", [call, hex(block)]) for call in calls]
        )
        decimals = decode_result(AGGREGATOR, "decimals", bytes.fromhex(str(raw_decimals)[2:]))
        return decode_round(address, block, decimals, bytes.fromhex(str(raw_round)[2:]))
    except (RpcError, DecodingError, ValueError) as exc:
        raise ChainUnavailable(
            f"price feed {address} on chain {chain_id} could not be read"
        ) from exc


def round_problem(round_: FeedRound, heartbeat_s: int, now_s: int) -> str | None:
    """Why a round cannot be used (``not_positive``, ``incomplete_round``, ``stale``: older
    than the feed's heartbeat at ``now_s``), or None."""
    if round_.answer <= 0:
        return "not_positive"
    if (
        round_.updated_at == 0
        or round_.started_at == 0
        or round_.answered_in_round < round_.round_id
    ):
        return "incomplete_round"
    if now_s - round_.updated_at > heartbeat_s:
        return "stale"
    return None


def decode_round(address: str, block: int, decimals: int, raw: bytes) -> FeedRound:
    """A ``latestRoundData`` answer (DecodingError / ValueError when it is not one)."""
    round_id, answer, started_at, updated_at, answered_in_round = decode_result(
        AGGREGATOR, "latestRoundData", raw
    )
    return FeedRound(
        address, block, decimals, round_id, answer, started_at, updated_at, answered_in_round
    )


# What the start-up check asks of each feed, in one batch with its other reads.
FEED_CHECK_NAMES = ("decimals", "description", "latestRoundData")
FEED_CHECK_CALLS = tuple("0x" + encode_call(AGGREGATOR, name).hex() for name in FEED_CHECK_NAMES)


def feed_problem(
    config: ChainConfig, feed: FeedConfig, answers: list[object], now_s: int
) -> str | None:
    """What is wrong with a configured feed, from its answers to :data:`FEED_CHECK_CALLS`
    (``chain.checks`` refuses to start on it), or None: its decimals must be readable, its
    description the configured pair (``ETH / USD``), its latest round usable."""
    asset = None if feed.asset == NATIVE else feed.asset
    pair = f"{config.asset_symbol(asset)} / {feed.currency}"
    label = f"price feed {pair} {feed.address}"
    decimals, description, latest = (_view(raw, name) for raw, name in _named(answers))
    if not isinstance(decimals, int):
        return f"{label}: decimals() cannot be read"
    if description != pair:
        return f"{label}: description() is {description!r}"
    if not isinstance(latest, bytes):
        return f"{label}: latestRoundData() cannot be read"
    try:
        round_ = decode_round(feed.address, 0, decimals, latest)
    except (DecodingError, ValueError):
        return f"{label}: latestRoundData() cannot be read"
    problem = round_problem(round_, feed.heartbeat_s, now_s)
    if problem is None:
        return None
    return (
        f"{label}: latest round {round_.round_id} is {problem.replace('_', ' ')} "
        f"(updated at {round_.updated_at}, heartbeat {feed.heartbeat_s} s)"
    )


def _named(answers: list[object]) -> list[tuple[object, str]]:
    return list(zip(answers, FEED_CHECK_NAMES, strict=True))


def _view(raw: object, name: str) -> object:
    """A decoded view answer (``latestRoundData``: its raw bytes), or None."""
    if not isinstance(raw, str) or not raw.startswith("0x"):
        return None
    try:
        data = bytes.fromhex(raw[2:])
        return data if name == "latestRoundData" else decode_result(AGGREGATOR, name, data)
    except (DecodingError, ValueError, OverflowError):
        return None
