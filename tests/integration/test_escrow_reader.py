"""The EscrowReader on a real anvil: every asset of many escrows in one call, at one block
that the answer names; a hostile token unreadable for its own accounts only; calls cut by
gas and answers cut short by a node's low gas cap read in full at the same block; a chain
that holds only the previous version read with it, one that holds none per asset."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from eth_account import Account

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import ESCROW_READER, ESCROW_READER_V1, TEST_TOKEN, load_artifact
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.chain.reader import ASK_AGAIN, CALL_GAS, account_gas, read_groups, reader_address
from invoicing.chain.reader_codec import READER, READER_V1
from invoicing.errors import ChainUnavailable
from tests.support.chain import CappedEvm, read_view
from tests.support.factory import deploy_test_contract, send
from tests.support.rpc_log import recording_proxy

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[2]
LOOPS, REVERTS = 0, 2


def fresh(count: int) -> list[str]:
    return [Account.create().address for _ in range(count)]


async def funded(evm: EvmClient, dev: DevDeployment) -> tuple[list[str], list[str]]:
    """Two escrows holding native coin (1 and 2 wei) and two holding TUSD (3 and 4)."""
    native, tokens = fresh(2), fresh(2)
    for amount, address in enumerate(native, 1):
        await send(evm, PAYER_KEY, address, b"", value=amount)
    for amount, address in enumerate(tokens, 3):
        await send(evm, PAYER_KEY, dev.token, encode_call(TEST_TOKEN, "transfer", address, amount))
    return native, tokens


def gateway_of(dev: DevDeployment, evm: EvmClient) -> EvmGateway:
    config = ChainConfig(
        chain_id=dev.chain_id, name="anvil", rpc_url="http://unused", factory=dev.factory
    )
    return EvmGateway(config, evm, b"")


async def test_one_call_reads_every_asset_and_names_its_block(
    evm: EvmClient, dev: DevDeployment
) -> None:
    native, tokens = await funded(evm, dev)
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    reverting = await deploy_test_contract(evm, "HostileToken", ("uint256", REVERTS))
    block = await evm.block_number()
    empty = fresh(3)
    groups = [
        (None, native + empty),
        (looping, tokens),
        (dev.token, tokens + empty),
        (reverting, native),
    ]

    raw = await evm.eth_call(reader_address(), READER.encode(groups), block)
    answer = READER.decode(raw, 14)
    # The six escrows that hold nothing are not in the answer: eight pairs after the head.
    assert len(raw) == 32 * 5 + 64 * 8

    assert answer.block == block
    assert answer.parent_hash.hex() == (await evm.get_block(block))["parentHash"][2:]
    # A looping and a reverting token are unreadable for their own accounts only.
    assert answer.values == [1, 2, 0, 0, 0, None, None, 3, 4, 0, 0, 0, None, None]
    assert await read_view(evm, reader_address(), ESCROW_READER, "BALANCE_OF_GAS") == 30_000


async def test_the_gateway_reads_at_the_block_asked_for(evm: EvmClient, dev: DevDeployment) -> None:
    native, tokens = await funded(evm, dev)
    before = await evm.block_number()
    await send(evm, PAYER_KEY, native[0], b"", value=5)
    gateway = gateway_of(dev, evm)

    at_before = await gateway.read_escrows([(None, native), (dev.token, tokens)], before)
    now = await gateway.read_escrows([(dev.token, tokens), (None, native)], before + 1)

    assert at_before == [[1, 2], [3, 4]]
    assert now == [[3, 4], [6, 2]]


async def test_calls_cut_by_gas_and_short_answers_read_everything_at_one_block(
    evm: EvmClient, dev: DevDeployment
) -> None:
    native, tokens = await funded(evm, dev)
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    block = await evm.block_number()
    burnt = fresh(30)  # 30 x 30k = 900k gas, more than one capped call gets
    groups = [(None, native), (looping, burnt), (dev.token, tokens)]

    # A node that runs each call with 300k gas: each answer is cut short, the rest is read
    # in further calls, at the same block.
    capped = CappedEvm(evm.rpc, cap=300_000)
    values = await read_groups(capped, READER, groups, block, dev.chain_id)
    assert values == [[1, 2], [None] * 30, [3, 4]]
    assert 4 <= capped.calls <= 8

    # Calls sized by the estimate: room for two native escrows or one token escrow each.
    sized = CappedEvm(evm.rpc, cap=50_000_000)
    budget = CALL_GAS + 2 * account_gas(None)
    values = await read_groups(sized, READER, groups[::2], block, dev.chain_id, budget)
    assert values == [[1, 2], [3, 4]]
    assert sized.calls == 3


async def test_the_head_is_read_with_the_balances_in_one_call(
    anvil: Any, evm: EvmClient, dev: DevDeployment
) -> None:
    native, tokens = await funded(evm, dev)
    groups = [(None, native), (dev.token, tokens)]
    async with recording_proxy(anvil.url) as (url, log):
        client = EvmClient.connect(url)
        try:
            gateway = gateway_of(dev, client)
            await gateway.read_escrows_at_head(groups)  # finds the reader first
            log.calls.clear()
            block, values = await gateway.read_escrows_at_head(groups)
        finally:
            await client.aclose()
    assert (block, values) == (await evm.block_number(), [[1, 2], [3, 4]])
    assert [(method, params[1]) for method, params in log.calls] == [("eth_call", "latest")]

    # Answers cut short by a node's gas cap are read in full at the block the first named.
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    capped = CappedEvm(evm.rpc, cap=300_000)
    block, values = await gateway_of(dev, capped).read_escrows_at_head(
        [(None, native), (looping, fresh(30))]
    )
    assert (block, values) == (await evm.block_number(), [[1, 2], [None] * 30])
    assert capped.calls >= 4


async def test_a_newest_block_below_a_head_already_seen_is_read_again_at_that_head(
    anvil: Any, evm: EvmClient, dev: DevDeployment
) -> None:
    """A URL that lags behind answers its newest block below the head the gateway already
    reported: the read goes again, at that head (reads never go back to an older block)."""
    native, _ = await funded(evm, dev)
    head = await evm.block_number()

    def a_block_behind(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        if request.get("method") != "eth_call" or request["params"][1] != "latest":
            return answer
        number = int(answer["result"][2:66], 16) - 1
        return {**answer, "result": "0x" + f"{number:064x}" + answer["result"][66:]}

    async with recording_proxy(anvil.url, a_block_behind) as (url, log):
        client = EvmClient.connect(url)
        try:
            gateway = gateway_of(dev, client)
            assert await gateway.block_number() == head
            log.calls.clear()
            block, values = await gateway.read_escrows_at_head([(None, native)])
        finally:
            await client.aclose()
    assert (block, values) == (head, [[1, 2]])
    assert [(method, params[1]) for method, params in log.calls if method == "eth_call"] == [
        ("eth_call", "latest"),
        ("eth_call", hex(head)),
    ]


@pytest.mark.parametrize("lies", [1, ASK_AGAIN, ASK_AGAIN + 1, 1000])
async def test_an_answer_at_another_block_is_asked_again_then_fails_the_read(
    anvil: Any, evm: EvmClient, dev: DevDeployment, lies: int
) -> None:
    """A node that answers for the next block (anvil, when it mines during the call) is asked
    again at the same block, ASK_AGAIN times at most; one that keeps doing so fails the read."""
    native, _ = await funded(evm, dev)
    block = await evm.block_number()
    told = 0

    def one_block_later(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        nonlocal told
        if request.get("method") != "eth_call" or told >= lies:
            return answer
        told += 1
        number = int(answer["result"][2:66], 16) + 1
        return {**answer, "result": "0x" + f"{number:064x}" + answer["result"][66:]}

    async with recording_proxy(anvil.url, one_block_later) as (url, log):
        lying = EvmClient.connect(url)
        try:
            if lies <= ASK_AGAIN:
                values = await read_groups(lying, READER, [(None, native)], block, dev.chain_id)
                assert values == [[1, 2]]
            else:
                with pytest.raises(ChainUnavailable, match=f"asked at {block}"):
                    await read_groups(lying, READER, [(None, native)], block, dev.chain_id)
        finally:
            await lying.aclose()
    assert [method for method, _params in log.calls].count("eth_call") == min(lies, ASK_AGAIN) + 1


async def test_a_chain_without_the_reader_is_read_per_asset_and_says_so_once(
    evm: EvmClient, dev: DevDeployment, caplog: pytest.LogCaptureFixture
) -> None:
    native, tokens = await funded(evm, dev)
    block = await evm.block_number()
    code = await evm.get_code(reader_address())
    await evm.call_rpc("anvil_setCode", [reader_address(), "0x"])
    try:
        counting = CappedEvm(evm.rpc, cap=50_000_000)
        gateway = gateway_of(dev, counting)
        with caplog.at_level(logging.WARNING, logger="invoicing.chain.reader"):
            first = await gateway.read_escrows([(None, native), (dev.token, tokens)], block)
            second = await gateway.read_escrows([(dev.token, tokens)], block)
            at_head = await gateway.read_escrows_at_head([(None, native)])
    finally:
        await evm.call_rpc("anvil_setCode", [reader_address(), "0x" + code.hex()])

    assert (first, second) == ([[1, 2], [3, 4]], [[3, 4]])
    assert at_head == (await evm.block_number(), [[1, 2]])  # the head, then balancesOf
    assert counting.calls == 4  # one balancesOf per asset and read
    assert [r.message.split(":")[0] for r in caplog.records] == [
        f"chain {dev.chain_id} has no EscrowReader at {reader_address()} (nor version 1 at "
        f"{READER_V1.address})"
    ]


async def test_a_chain_with_the_previous_reader_only_is_read_with_it_and_says_so(
    anvil: Any, evm: EvmClient, dev: DevDeployment, caplog: pytest.LogCaptureFixture
) -> None:
    """A deployment from before version 2: the reader's new address holds nothing, the
    previous version's holds version 1 (its runtime code, as `invoicing deploy` left it)."""
    native, tokens = await funded(evm, dev)
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    block = await evm.block_number()
    code = await evm.get_code(READER.address)
    previous = "0x" + load_artifact(ESCROW_READER_V1).deployed_bytecode.hex()
    await evm.call_rpc("anvil_setCode", [READER.address, "0x"])
    await evm.call_rpc("anvil_setCode", [READER_V1.address, previous])
    try:
        async with recording_proxy(anvil.url) as (url, log):
            client = EvmClient.connect(url)
            try:
                gateway = gateway_of(dev, client)
                with caplog.at_level(logging.INFO, logger="invoicing.chain.reader"):
                    values = await gateway.read_escrows(
                        [(None, native), (dev.token, tokens), (looping, tokens)], block
                    )
            finally:
                await client.aclose()
    finally:
        await evm.call_rpc("anvil_setCode", [READER.address, "0x" + code.hex()])
        await evm.call_rpc("anvil_setCode", [READER_V1.address, "0x"])

    assert values == [[1, 2], [3, 4], [None, None]]
    asked = [
        (method, (params[0] if method == "eth_getCode" else params[0]["to"]).lower())
        for method, params in log.calls
    ]
    # Which reader: the new one's code, then the previous one's; then one call reads all.
    assert asked == [
        ("eth_getCode", READER.address.lower()),
        ("eth_getCode", READER_V1.address.lower()),
        ("eth_call", READER_V1.address.lower()),
    ]
    assert [r.message.split(":")[0] for r in caplog.records] == [
        f"chain {dev.chain_id} reads escrows with the previous EscrowReader (version 1) at "
        f"{READER_V1.address}"
    ]


async def test_the_chain_with_the_reader_says_so_once(
    evm: EvmClient, dev: DevDeployment, caplog: pytest.LogCaptureFixture
) -> None:
    native, _ = await funded(evm, dev)
    gateway = gateway_of(dev, evm)
    with caplog.at_level(logging.INFO, logger="invoicing.chain.reader"):
        await gateway.read_escrows([(None, native)], await evm.block_number())
        await gateway.read_escrows_at_head([(None, native)])
    assert [r.message for r in caplog.records] == [
        f"chain {dev.chain_id} reads escrows with the EscrowReader at {READER.address}"
    ]
