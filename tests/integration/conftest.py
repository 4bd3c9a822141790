"""Integration fixtures: one real anvil node per test session, with the dev contracts on it.

Tests share the chain, so each one works with fresh owners (random keys) and fresh escrow
salts instead of resetting state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilProcess]:
    """anvil on a free port, automining (every transaction gets its own block)."""
    with AnvilProcess() as node:
        yield node


@pytest.fixture(scope="session")
async def evm(anvil: AnvilProcess) -> AsyncIterator[EvmClient]:
    client = EvmClient.connect(anvil.url)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def dev(evm: EvmClient) -> DevDeployment:
    """PaymentFactory and TestToken deployed by anvil account 0."""
    return await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])


@pytest.fixture(scope="session")
def factory(dev: DevDeployment) -> str:
    return dev.factory
