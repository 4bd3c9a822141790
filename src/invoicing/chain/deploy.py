"""Deploy the contracts a development chain needs: PaymentFactory and the demo TestToken.

Used by ``invoicing dev`` and the integration tests. Every anvil default account receives
1,000,000 TUSD so a developer can pay invoices from any of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eth_account import Account

from invoicing.addresses import normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_ADDRESSES
from invoicing.chain.artifacts import TEST_TOKEN, factory_bytecode, test_token_bytecode
from invoicing.chain.evm import EvmClient

TEST_TOKEN_DECIMALS = 6
TEST_TOKEN_SYMBOL = "TUSD"
DEV_MINT_RAW = 1_000_000 * 10**TEST_TOKEN_DECIMALS
# TestToken.mint to a fresh holder costs ~51k gas (estimated against a not-yet-mined token
# is impossible when the mints are pipelined, so the limit is fixed).
MINT_GAS = 100_000


class DeploymentFailed(RuntimeError):
    """A deployment or setup transaction reverted."""


@dataclass(frozen=True)
class DevDeployment:
    """Addresses of the dev contracts and who holds TestToken."""

    chain_id: int
    factory: str
    token: str
    token_symbol: str
    token_decimals: int
    funded_accounts: tuple[str, ...]
    minted_raw: int


def _checked(receipt: dict[str, Any], what: str) -> dict[str, Any]:
    if receipt.get("status") != 1:
        raise DeploymentFailed(f"{what} failed: {receipt.get('transactionHash')}")
    return receipt


async def deploy_contract(client: EvmClient, deployer_key: str, bytecode: bytes) -> str:
    """Deploy creation code (constructor arguments already appended); returns the address."""
    receipt = _checked(await client.transact(deployer_key, None, bytecode), "deployment")
    return normalize_address(receipt["contractAddress"])


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
    """Deploy PaymentFactory and TestToken, and mint 1,000,000 TUSD to anvil's ten accounts."""
    Account.from_key(deployer_key)  # fail fast on a malformed key, before any transaction
    factory = await deploy_contract(client, deployer_key, factory_bytecode())
    token = await deploy_contract(client, deployer_key, test_token_bytecode())
    await mint_test_tokens(client, deployer_key, token, DEV_ADDRESSES, DEV_MINT_RAW)
    return DevDeployment(
        chain_id=await client.chain_id(),
        factory=factory,
        token=token,
        token_symbol=TEST_TOKEN_SYMBOL,
        token_decimals=TEST_TOKEN_DECIMALS,
        funded_accounts=DEV_ADDRESSES,
        minted_raw=DEV_MINT_RAW,
    )
