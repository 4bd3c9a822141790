"""Deploy PaymentFactory (and, on a development chain, the demo TestToken) deterministically.

Both go through the deterministic deployment proxy (Arachnid's CREATE2 deployer, see
:data:`DETERMINISTIC_DEPLOYMENT_PROXY`) with the fixed salt :data:`DEPLOYMENT_SALT` (32 zero
bytes), so a given artifact lands at the same address on every chain:

    address = keccak256(0xff ++ proxy ++ salt ++ keccak256(init_code))[12:]

PaymentFactory's EIP-712 domain separator is cached in immutables (chain id, own address)
filled by its constructor; its init code itself takes no arguments, so it is the same on
every chain. ``invoicing deploy`` uses :func:`deploy_factory`; ``invoicing dev`` and the
integration tests use :func:`deploy_dev_contracts`, which deploys the factory the same way, so
the dev factory address is the address ``invoicing deploy`` prints. Every anvil default account
receives 1,000,000 TUSD so a developer can pay invoices from any of them. Last comes a
MockAggregator (contracts/dev) pricing the native coin in USD, whose answer anyone may set:
deployed after the others, it leaves their addresses as they were. ``invoicing dev`` keeps
its answer recent (:func:`refresh_dev_feed`). The EscrowReader (``chain.reader``), deployed
last the same way, holds nothing and only reads. The Subscriptions contract
(``payments.subscriptions``) takes the factory's address as its one constructor argument:
that address is the same on every chain, so its own is too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode
from eth_account import Account

from invoicing.addresses import address_bytes, checksum_encode, normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.answers import RpcError
from invoicing.chain.anvil import DEV_ADDRESSES
from invoicing.chain.artifacts import (
    ESCROW_READER,
    MOCK_AGGREGATOR,
    PAYMENT_FACTORY,
    SUBSCRIPTIONS,
    TEST_TOKEN,
    factory_bytecode,
    load_artifact,
    test_token_bytecode,
)
from invoicing.chain.config import Eip712Domain, TokenConfig
from invoicing.chain.evm import EvmClient
from invoicing.chain.feeds import read_feed_round
from invoicing.chain.versions import same_runtime_code
from invoicing.hashing import keccak256

# The deterministic deployment proxy, from its official repository
# https://github.com/Arachnid/deterministic-deployment-proxy (README, "Latest Outputs", commit
# b3bb19c5aa8af6d9424fd66a234116a1e8adc3bf): "submit a transaction `to` the address ... The
# data should be the 32 byte 'salt' followed by your init code". Its runtime
# (source/deterministic-deployment-proxy.yul) CREATE2s the init code with that salt, reverts
# when creation fails, and returns the new address as 20 bytes. It is deployed by a presigned
# one-time transaction (no chain id, so any chain that accepts pre-EIP-155 transactions takes
# it), from a one-time signer that needs gas price x gas limit = 100 gwei x 100,000 = 0.01 of
# the native coin first.
DETERMINISTIC_DEPLOYMENT_PROXY = "0x4e59b44847b379578588920cA78FbF26c0B4956C"
PROXY_DEPLOYMENT_SIGNER = "0x3fAB184622Dc19b6109349B94811493BF2a45362"
PROXY_DEPLOYMENT_COST_WEI = 100 * 10**9 * 100_000
PROXY_DEPLOYMENT_TX = (
    "0xf8a58085174876e800830186a08080b853604580600e600039806000f350fe7fffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b"
    "8082525050506014600cf31ba02222222222222222222222222222222222222222222222222222222222222222"
    "a02222222222222222222222222222222222222222222222222222222222222222"
)
# The proxy's runtime code: the presigned transaction's init code (``604580600e600039806000f3
# 50fe``) returns the 0x45 bytes after its first 0x0e; tests/unit/test_deploy_address.py checks
# this against PROXY_DEPLOYMENT_TX. ``invoicing dev`` installs it with anvil_setCode if the
# node lacks it.
PROXY_RUNTIME_CODE = bytes.fromhex(
    "7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035"
    "828234f58015156039578182fd5b8082525050506014600cf3"
)
# The fixed CREATE2 salt of every deployment this project makes: 32 zero bytes.
DEPLOYMENT_SALT = bytes(32)

TEST_TOKEN_DECIMALS = 6
TEST_TOKEN_SYMBOL = "TUSD"
# contracts/TestToken.sol: ERC20Permit("Test USD") signs under name "Test USD", version "1"
# (EIP-2612 permit and EIP-3009 transfers with authorization alike).
TEST_TOKEN_EIP712 = Eip712Domain("Test USD", "1")
DEV_MINT_RAW = 1_000_000 * 10**TEST_TOKEN_DECIMALS
# TestToken.mint to a fresh holder costs ~51k gas (estimated against a not-yet-mined token
# is impossible when the mints are pipelined, so the limit is fixed).
MINT_GAS = 100_000
# The dev chain's native coin price feed: "ETH / USD" with 8 decimals (as Chainlink's USD feeds
# answer; the start-up check reads decimals() rather than trusting this), 3,000 USD per ETH
# until a test or developer sets another answer.
DEV_FEED_DECIMALS = 8
DEV_FEED_DESCRIPTION = "ETH / USD"
DEV_FEED_ANSWER = 3_000 * 10**DEV_FEED_DECIMALS


class DeploymentFailed(RuntimeError):
    """A deployment or setup transaction reverted, or the deployed code is not the artifact's;
    ``str`` is one line."""


class ProxyMissing(DeploymentFailed):
    """The chain has no deterministic deployment proxy; ``str`` says how to deploy it."""

    def __init__(self, chain_id: int) -> None:
        super().__init__(
            f"chain {chain_id} has no deterministic deployment proxy at "
            f"{DETERMINISTIC_DEPLOYMENT_PROXY}: send {PROXY_DEPLOYMENT_COST_WEI} wei (0.01 of the "
            f"native coin) to its one-time signer {PROXY_DEPLOYMENT_SIGNER}, then submit its "
            f"presigned deployment transaction with eth_sendRawTransaction: {PROXY_DEPLOYMENT_TX} "
            "(see https://github.com/Arachnid/deterministic-deployment-proxy), and run this again"
        )


@dataclass(frozen=True)
class Deployed:
    """Where a deterministic deployment put the contract, and the transaction that did it
    (None when the contract was already there)."""

    chain_id: int
    address: str
    tx_hash: str | None

    def as_json(self) -> dict[str, object]:
        return {"chainId": self.chain_id, "factory": self.address, "txHash": self.tx_hash}


@dataclass(frozen=True)
class DevDeployment:
    """Addresses of the dev contracts and who holds TestToken."""

    chain_id: int
    factory: str
    token: str
    token_symbol: str
    token_decimals: int
    funded_accounts: tuple[str, ...]
    # The MockAggregator pricing the native coin in USD (TUSD is pegged to USD).
    aggregator: str
    minted_raw: int

    @property
    def token_config(self) -> TokenConfig:
        """TestToken as an allow-listed token, with its EIP-3009 domain, pegged to USD (the
        demo stablecoin stands for one)."""
        return TokenConfig(
            self.token,
            self.token_symbol,
            self.token_decimals,
            eip3009=TEST_TOKEN_EIP712,
            pegged="USD",
        )


def _checked(receipt: dict[str, Any], what: str) -> dict[str, Any]:
    if receipt.get("status") != 1:
        raise DeploymentFailed(f"{what} failed: {receipt.get('transactionHash')}")
    return receipt


async def deploy_contract(client: EvmClient, deployer_key: str, bytecode: bytes) -> str:
    """Deploy creation code (constructor arguments already appended); returns the address."""
    receipt = _checked(await client.transact(deployer_key, None, bytecode), "deployment")
    return normalize_address(receipt["contractAddress"])


def create2_deployment_address(deployer: str, salt: bytes, init_code: bytes) -> str:
    """EIP-1014: keccak256(0xff ++ deployer ++ salt ++ keccak256(init_code))[12:]."""
    if len(salt) != 32:
        raise ValueError(f"CREATE2 salt must be 32 bytes, got {len(salt)}")
    digest = keccak256(b"\xff" + address_bytes(deployer) + salt + keccak256(init_code))
    return checksum_encode(digest[12:])


def deterministic_address(init_code: bytes, salt: bytes = DEPLOYMENT_SALT) -> str:
    """The address the proxy CREATE2s ``init_code`` to with ``salt``, on any chain."""
    return create2_deployment_address(DETERMINISTIC_DEPLOYMENT_PROXY, salt, init_code)


def factory_address() -> str:
    """The PaymentFactory address of the shipped artifact, the same on every chain."""
    return deterministic_address(factory_bytecode())


async def deploy_deterministic(
    client: EvmClient, deployer_key: str, init_code: bytes, artifact: str
) -> Deployed:
    """Deploy ``init_code`` (of ``artifact``) through the proxy unless it is already there.

    Already deployed (the predicted address holds ``artifact``'s runtime code, immutables
    aside) → ``tx_hash`` None. Other code at that address, a missing proxy (ProxyMissing), a
    reverted deployment or code that is not the artifact's afterwards → DeploymentFailed.
    """
    Account.from_key(deployer_key)  # fail fast on a malformed key, before any transaction
    chain_id = await client.chain_id()
    address = deterministic_address(init_code)
    shipped = load_artifact(artifact)
    code = await client.get_code(address)
    if code:
        if not same_runtime_code(code, shipped):
            raise DeploymentFailed(
                f"chain {chain_id}: {address} holds code that is not the shipped {artifact}"
            )
        return Deployed(chain_id, address, None)
    if not await client.get_code(DETERMINISTIC_DEPLOYMENT_PROXY):
        raise ProxyMissing(chain_id)
    receipt = await client.transact(
        deployer_key, DETERMINISTIC_DEPLOYMENT_PROXY, DEPLOYMENT_SALT + init_code
    )
    tx_hash = str(_checked(receipt, f"{artifact} deployment")["transactionHash"])
    if not same_runtime_code(await client.get_code(address), shipped):
        raise DeploymentFailed(
            f"chain {chain_id}: after {tx_hash} the code at {address} is not the shipped {artifact}"
        )
    return Deployed(chain_id, address, tx_hash)


async def deploy_factory(client: EvmClient, deployer_key: str) -> Deployed:
    """``invoicing deploy``: PaymentFactory at its deterministic address, verified."""
    return await deploy_deterministic(client, deployer_key, factory_bytecode(), PAYMENT_FACTORY)


async def deploy_reader(client: EvmClient, deployer_key: str) -> Deployed:
    """EscrowReader (``chain.reader``) at its deterministic address, verified; ``invoicing
    deploy`` deploys it after the factory."""
    init_code = load_artifact(ESCROW_READER).bytecode
    return await deploy_deterministic(client, deployer_key, init_code, ESCROW_READER)


def subscriptions_init_code() -> bytes:
    """Subscriptions' creation code with the factory's address, the same on every chain."""
    arguments = encode(["address"], [factory_address()])
    return load_artifact(SUBSCRIPTIONS).bytecode + arguments


def subscriptions_address() -> str:
    """The Subscriptions contract's address, the same on every chain."""
    return deterministic_address(subscriptions_init_code())


async def deploy_subscriptions(client: EvmClient, deployer_key: str) -> Deployed:
    """Subscriptions at its deterministic address, verified; ``invoicing deploy`` and
    ``invoicing dev`` deploy it after the factory."""
    return await deploy_deterministic(
        client, deployer_key, subscriptions_init_code(), SUBSCRIPTIONS
    )


async def install_proxy_on_dev_chain(client: EvmClient) -> None:
    """Give a development node (anvil) the proxy when it lacks it, with anvil_setCode (the
    pinned anvil has it unless started with ``--disable-default-create2-deployer``); a node
    without anvil_setCode → ProxyMissing."""
    if await client.get_code(DETERMINISTIC_DEPLOYMENT_PROXY):
        return
    try:
        await client.call_rpc(
            "anvil_setCode", [DETERMINISTIC_DEPLOYMENT_PROXY, "0x" + PROXY_RUNTIME_CODE.hex()]
        )
    except RpcError:
        raise ProxyMissing(await client.chain_id()) from None


async def mint_test_tokens(
    client: EvmClient,
    sender_key: str,
    token: str,
    holders: Sequence[str],
    amount_raw: int,
) -> None:
    """Mint ``amount_raw`` TestToken to each holder; the transactions are pipelined."""
    sent = [
        await client.transact(
            sender_key,
            token,
            encode_call(TEST_TOKEN, "mint", holder, amount_raw),
            gas=MINT_GAS,
            wait=False,
        )
        for holder in holders
    ]
    receipts = await asyncio.gather(
        *(client.wait_for_receipt(tx["transactionHash"]) for tx in sent)
    )
    for receipt in receipts:
        _checked(receipt, "TestToken.mint")


async def deploy_dev_contracts(client: EvmClient, deployer_key: str) -> DevDeployment:
    """Deploy PaymentFactory and TestToken through the proxy (installed with anvil_setCode if
    the node lacks it), and mint 1,000,000 TUSD to anvil's ten accounts."""
    Account.from_key(deployer_key)  # fail fast on a malformed key, before any transaction
    await install_proxy_on_dev_chain(client)
    factory = await deploy_factory(client, deployer_key)
    token = await deploy_deterministic(client, deployer_key, test_token_bytecode(), TEST_TOKEN)
    await mint_test_tokens(client, deployer_key, token.address, DEV_ADDRESSES, DEV_MINT_RAW)
    aggregator = await deploy_deterministic(
        client, deployer_key, dev_aggregator_init_code(), MOCK_AGGREGATOR
    )
    await deploy_reader(client, deployer_key)
    await deploy_subscriptions(client, deployer_key)
    return DevDeployment(
        chain_id=factory.chain_id,
        factory=factory.address,
        token=token.address,
        token_symbol=TEST_TOKEN_SYMBOL,
        token_decimals=TEST_TOKEN_DECIMALS,
        funded_accounts=DEV_ADDRESSES,
        minted_raw=DEV_MINT_RAW,
        aggregator=aggregator.address,
    )


async def refresh_dev_feed(
    client: EvmClient, sender_key: str, aggregator: str, max_age_s: int, now_s: int
) -> str | None:
    """Keep a development chain's MockAggregator usable: when its latest round was updated
    more than ``max_age_s`` before ``now_s``, post its answer again as a new round
    (``setAnswer``: updated at the new block's time). The answer stays what it was, the dev
    feed's or one set by hand; a round without a positive answer gets ``DEV_FEED_ANSWER``.
    Returns the transaction's hash, or None when the round was recent enough."""
    chain_id = await client.chain_id()
    latest = await read_feed_round(client, chain_id, aggregator, await client.block_number())
    if now_s - latest.updated_at <= max_age_s:
        return None
    answer = latest.answer if latest.answer > 0 else DEV_FEED_ANSWER
    receipt = await client.transact(
        sender_key, aggregator, encode_call(MOCK_AGGREGATOR, "setAnswer", answer)
    )
    return str(_checked(receipt, "MockAggregator.setAnswer")["transactionHash"])


def dev_aggregator_init_code() -> bytes:
    """MockAggregator's creation code with the dev feed's constructor arguments."""
    arguments = encode(
        ["uint8", "string", "int256"], [DEV_FEED_DECIMALS, DEV_FEED_DESCRIPTION, DEV_FEED_ANSWER]
    )
    return load_artifact(MOCK_AGGREGATOR).bytecode + arguments
