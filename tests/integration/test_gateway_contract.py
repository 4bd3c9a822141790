"""One set of ChainGateway checks, run against both ``FakeChain`` and ``EvmGateway`` on anvil.

The unit tests trust the fake to answer as a node does; these checks hold it to that. Each
runs on a ``World``: a gateway plus the few moves a test makes on its chain (pay an address,
mine a block), done by hand on the fake and by transactions on anvil. Every assertion goes
through the ``ChainGateway`` interface alone, so a difference between the two is a fault of
the fake (or of the interface's documentation).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import pytest
from eth_account import Account

from invoicing.addresses import checksum_encode, normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.answers import RpcError
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import ERC20
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.escrows import escrow_init_code_hash
from invoicing.chain.evm import EvmClient
from invoicing.chain.fake import FakeChain
from invoicing.chain.gateway import ChainGateway, EvmGateway, NonceUse
from invoicing.chain.rpc import RpcPolicy
from invoicing.errors import ChainUnavailable
from invoicing.hashing import keccak256
from tests.conftest import chain_config

TOKEN_DECIMALS = 6


class World(Protocol):
    gateway: ChainGateway
    token: str  # an allow-listed token (TUSD, 6 decimals)

    async def pay(self, address: str, amount: int, token: str | None = None) -> None: ...

    async def mine(self) -> None: ...


class FakeWorld:
    def __init__(self) -> None:
        self.chain = FakeChain()
        self.token = normalize_address("0x" + "7d" * 20)
        self.chain.add_token(self.token, TOKEN_DECIMALS, "TUSD")
        self.gateway: ChainGateway = self.chain

    async def pay(self, address: str, amount: int, token: str | None = None) -> None:
        self.chain.block += 1  # as on anvil, which mines each transaction in a block of its own
        self.chain.pay(address, amount, token)

    async def mine(self) -> None:
        self.chain.block += 1


class AnvilWorld:
    def __init__(self, gateway: EvmGateway, evm: EvmClient, dev: DevDeployment) -> None:
        self.gateway: ChainGateway = gateway
        self.evm = evm
        self.token = dev.token

    async def pay(self, address: str, amount: int, token: str | None = None) -> None:
        if token is None:
            receipt = await self.evm.transact(DEV_PRIVATE_KEYS[1], address, value=amount)
        else:
            data = encode_call(ERC20, "transfer", address, amount)
            receipt = await self.evm.transact(DEV_PRIVATE_KEYS[0], token, data)
        assert receipt["status"] == 1

    async def mine(self) -> None:
        await self.evm.call_rpc("evm_mine")


@pytest.fixture(params=["fake", "anvil"])
async def world(
    request: pytest.FixtureRequest, anvil: AnvilProcess, evm: EvmClient, dev: DevDeployment
) -> AsyncIterator[World]:
    if request.param == "fake":
        yield FakeWorld()
        return
    config = chain_config(anvil, dev)
    client = EvmClient.connect(anvil.url, chain_id=config.chain_id)
    gateway = EvmGateway(config, client, escrow_init_code_hash())
    yield AnvilWorld(gateway, evm, dev)
    await gateway.aclose()


def new_address() -> str:
    return checksum_encode(os.urandom(20))


async def test_the_node_reports_the_configured_chain_id(world: World) -> None:
    assert await world.gateway.chain_id() == world.gateway.config.chain_id


async def test_the_head_moves_up_with_each_block_and_has_a_timestamp(world: World) -> None:
    first = await world.gateway.block_number()
    await world.mine()
    second = await world.gateway.block_number()

    assert second == first + 1
    timestamp = await world.gateway.block_timestamp(second)
    assert isinstance(timestamp, int) and timestamp > 1_600_000_000
    assert await world.gateway.block_timestamp(first) <= timestamp


async def test_a_block_above_the_head_has_no_timestamp(world: World) -> None:
    head = await world.gateway.block_number()

    with pytest.raises(ChainUnavailable):
        await world.gateway.block_timestamp(head + 1000)


async def test_balances_answer_each_address_in_order(world: World) -> None:
    paid, other = new_address(), new_address()
    await world.pay(paid, 12_345)
    await world.pay(other, 7, world.token)

    native = await world.gateway.balances(None, [other, paid, other.lower()])
    tokens = await world.gateway.balances(world.token, [paid, other])

    assert native == [0, 12_345, 0]
    assert tokens == [0, 7]
    assert await world.gateway.balances(None, []) == []
    assert await world.gateway.native_balance(paid) == 12_345


async def test_balances_at_a_block_are_those_of_that_block(world: World) -> None:
    address = new_address()
    await world.pay(address, 5)
    before = await world.gateway.block_number()
    await world.pay(address, 6)
    head = await world.gateway.block_number()

    assert await world.gateway.balances(None, [address], before) == [5]
    assert await world.gateway.balances(None, [address], head) == [11]
    assert await world.gateway.balances(None, [address]) == [11]


async def test_escrows_read_at_the_head_name_the_head(world: World) -> None:
    paid, other = new_address(), new_address()
    await world.pay(paid, 21)
    await world.pay(other, 8, world.token)
    head = await world.gateway.block_number()

    block, values = await world.gateway.read_escrows_at_head(
        [(world.token, [paid, other]), (None, [other, paid])]
    )

    assert (block, values) == (head, [[0, 8], [0, 21]])
    await world.mine()
    assert (await world.gateway.read_escrows_at_head([(None, [paid])]))[0] == head + 1


async def test_token_symbols_come_from_the_configuration(world: World) -> None:
    config = world.gateway.config

    assert await world.gateway.token_symbol(None) == config.native_symbol == "ETH"
    assert await world.gateway.token_symbol(world.token.lower()) == "TUSD"
    assert await world.gateway.token_symbol(new_address()) == "TOKEN"


async def test_escrow_addresses_are_checksummed_and_one_per_owner_and_salt(world: World) -> None:
    owner, salt = new_address(), os.urandom(32)

    address = world.gateway.escrow_address(owner, salt)

    assert address == checksum_encode(bytes.fromhex(address[2:]))
    assert world.gateway.escrow_address(owner.lower(), salt) == address
    assert world.gateway.escrow_address(owner, os.urandom(32)) != address
    assert world.gateway.escrow_address(new_address(), salt) != address


async def test_a_new_owner_has_nonce_zero_and_no_fee_settings(world: World) -> None:
    owner = new_address()

    assert await world.gateway.factory_nonce(owner) == 0
    assert await world.gateway.fee_settings(owner) == (0, None)


async def test_the_factory_has_code_and_a_fresh_account_has_none(world: World) -> None:
    assert await world.gateway.has_code(world.gateway.factory) is True
    assert await world.gateway.has_code(new_address()) is False


async def test_fees_are_eip1559_with_a_tip_under_the_cap(world: World) -> None:
    max_fee, tip = await world.gateway.fee_caps()

    assert await world.gateway.eip1559() is True
    assert 0 < tip <= max_fee


async def test_gas_is_estimated_and_a_cap_too_low_is_an_rpc_error(world: World) -> None:
    sender = new_address()
    await world.pay(sender, 10**18)

    to, data = new_address(), b"\x01" * 100

    gas = await world.gateway.estimate_gas(sender, to, data, value=1)

    assert isinstance(gas, int) and gas >= 21_000
    assert await world.gateway.estimate_gas(sender, to, data, value=1, gas_cap=gas) == gas
    with pytest.raises(RpcError):
        await world.gateway.estimate_gas(sender, to, data, value=1, gas_cap=gas - 1)


async def test_a_sent_transaction_is_known_by_its_hash(world: World) -> None:
    account = Account.create()
    await world.pay(account.address, 10**18)
    max_fee, tip = await world.gateway.fee_caps()
    signed = account.sign_transaction(
        {
            "type": 2,
            "chainId": world.gateway.config.chain_id,
            "nonce": await world.gateway.transaction_count(account.address),
            "to": new_address(),
            "value": 1,
            "gas": 21_000,
            "maxFeePerGas": max_fee,
            "maxPriorityFeePerGas": tip,
        }
    )
    raw = bytes(signed.raw_transaction)
    unknown = "0x" + keccak256(os.urandom(32)).hex()

    tx_hash = await world.gateway.send_raw_transaction(raw)

    assert tx_hash == "0x" + keccak256(raw).hex()
    assert await world.gateway.is_known_transaction(tx_hash) is True
    assert await world.gateway.is_known_transaction(unknown) is False
    assert await world.gateway.receipt(unknown) is None


async def test_a_nonce_nobody_used_is_neither_mined_nor_taken(world: World) -> None:
    unknown = "0x" + keccak256(os.urandom(32)).hex()
    fresh = new_address()
    head = await world.gateway.block_number()
    assert await world.gateway.nonce_use(fresh, 0, [unknown], head) == NonceUse(None, taken=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class DownWorld:
    gateway: ChainGateway


@pytest.fixture(params=["fake", "anvil"])
async def down(
    request: pytest.FixtureRequest, anvil: AnvilProcess, dev: DevDeployment
) -> AsyncIterator[DownWorld]:
    """A gateway whose node does not answer."""
    if request.param == "fake":
        chain = FakeChain()
        chain.available = False
        yield DownWorld(chain)
        return
    url = f"http://127.0.0.1:{_closed_port()}"
    config = chain_config(anvil, dev, rpc_url=url, rpc_urls=(url,), eip1559=None)
    policy = RpcPolicy(timeout_s=1.0, max_attempts=1, backoff_s=0.0)
    client = EvmClient.connect(config.rpc_urls, policy=policy, chain_id=config.chain_id)
    gateway = EvmGateway(config, client, escrow_init_code_hash())
    yield DownWorld(gateway)
    await gateway.aclose()


READS: list[tuple[str, tuple[Any, ...]]] = [
    ("block_number", ()),
    ("block_timestamp", (1,)),
    ("chain_id", ()),
    ("balances", (None, ["0x" + "11" * 20])),
    ("read_escrows", ([(None, ["0x" + "11" * 20])], 1)),
    ("read_escrows_at_head", ([(None, ["0x" + "11" * 20])],)),
    ("factory_nonce", ("0x" + "11" * 20,)),
    ("fee_settings", ("0x" + "11" * 20,)),
    ("has_code", ("0x" + "11" * 20,)),
    ("eip1559", ()),
    ("fee_caps", ()),
    ("native_balance", ("0x" + "11" * 20,)),
    ("transaction_count", ("0x" + "11" * 20,)),
    ("receipt", ("0x" + "22" * 32,)),
    ("is_known_transaction", ("0x" + "22" * 32,)),
    ("nonce_use", ("0x" + "11" * 20, 0, ["0x" + "22" * 32], 1)),
]


@pytest.mark.parametrize(("method", "args"), READS, ids=[name for name, _ in READS])
async def test_every_call_to_a_node_that_is_down_is_chain_unavailable(
    down: DownWorld, method: str, args: tuple[Any, ...]
) -> None:
    with pytest.raises(ChainUnavailable):
        await getattr(down.gateway, method)(*args)
