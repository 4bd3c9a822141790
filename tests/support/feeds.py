"""The dev price feed (MockAggregator) on the test chain: its answer and rounds, set and read."""

from __future__ import annotations

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import MOCK_AGGREGATOR
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient

SETTER_KEY = DEV_PRIVATE_KEYS[0]
USD_8 = 10**8  # the dev feed answers with 8 decimals


async def set_answer(evm: EvmClient, dev: DevDeployment, answer: int) -> int:
    """A new, complete round of the dev feed with ``answer``; returns its round id."""
    receipt = await evm.transact(
        SETTER_KEY, dev.aggregator, encode_call(MOCK_AGGREGATOR, "setAnswer", answer)
    )
    assert receipt["status"] == 1
    return await latest_round(evm, dev)


async def set_round(evm: EvmClient, dev: DevDeployment, *fields: int) -> None:
    """The dev feed's latest round as given: (roundId, answer, startedAt, updatedAt,
    answeredInRound)."""
    data = encode_call(MOCK_AGGREGATOR, "setRoundData", *fields)
    assert (await evm.transact(SETTER_KEY, dev.aggregator, data))["status"] == 1


async def latest_round(evm: EvmClient, dev: DevDeployment) -> int:
    raw = await evm.eth_call(dev.aggregator, encode_call(MOCK_AGGREGATOR, "latestRound"))
    return int.from_bytes(raw, "big")
