"""Subscriptions on anvil for the integration and chaos tests: an opted-in owner's
subscription a funded payer approved, and what the chain and the database then hold."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.payments.opt_in import set_gasless
from invoicing.tables.notifications import Event
from invoicing.tables.settlement import RelayerTransaction, TxPurpose
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.factory import sign_typed
from tests.support.gasless import funded_payer

PERIOD_S = 60
AMOUNT_RAW = 2_500_000  # 2.5 TUSD


async def charges_sent(app: RunningApp, owner: str) -> int:
    async with app.services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(RelayerTransaction)
            .where(
                RelayerTransaction.owner_key == owner.lower(),
                RelayerTransaction.purpose == TxPurpose.SUBSCRIPTION_CHARGE,
            )
        )
    return int(count or 0)


async def event_types(app: RunningApp, owner: str) -> list[str]:
    async with app.services.db.sessions() as session:
        rows = await session.scalars(
            select(Event.type)
            .where(Event.owner_key == owner.lower(), Event.type.like("subscription.%"))
            .order_by(Event.created_at)
        )
        return list(rows)


def own_chain(chain_id: int) -> tuple[Any, Any, Any]:
    """The module fixtures ``anvil``, ``evm`` and ``dev`` on a chain of the module's own, for
    ``anvil, evm, dev = own_chain(…)``: subscription tests move the chain's clock forward
    (``evm_increaseTime``), which would leave every later test of the worker on the shared
    chain in the future; and a chain id of its own keeps the relayer's recorded nonces apart
    (the run's database outlives each module's chain)."""

    @pytest.fixture(scope="module")
    def anvil() -> Iterator[AnvilProcess]:
        with AnvilProcess(chain_id=chain_id) as node:
            yield node

    @pytest.fixture(scope="module")
    async def evm(anvil: AnvilProcess) -> AsyncIterator[EvmClient]:
        client = EvmClient.connect(anvil.url)
        yield client
        await client.aclose()

    @pytest.fixture(scope="module")
    async def dev(evm: EvmClient) -> DevDeployment:
        return await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])

    return anvil, evm, dev


async def later(evm: EvmClient, seconds: int) -> None:
    await evm.call_rpc("evm_increaseTime", [seconds])
    await evm.call_rpc("evm_mine", [])


async def subscribed(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, **extra: Any
) -> tuple[LocalAccount, dict[str, str], LocalAccount, dict[str, Any]]:
    """An opted-in owner's subscription of 2.5 TUSD a minute, a payer holding 10 TUSD who
    approved the contract and signed it: (owner, headers, payer, created)."""
    owner: LocalAccount = Account.create()
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    headers = key_headers(await issue_api_key(app.services, owner))
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "tokenAddress": dev.token,
        "amount": "2.5",
        "periodSeconds": PERIOD_S,
        **extra,
    }
    created = await app.http.post("/integration/subscriptions", json=body, headers=headers)
    assert created.status_code == 201, created.text
    payer = await funded_payer(evm, dev, 10_000_000)
    await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**18)])
    spender = created.json()["authorization"]["spender"]
    approve = encode_call(TEST_TOKEN, "approve", spender, 2**256 - 1)
    assert (await evm.transact(payer.key.hex(), dev.token, approve))["status"] == 1
    return owner, headers, payer, created.json()


async def token_balance(evm: EvmClient, dev: DevDeployment, holder: str) -> int:
    raw = await evm.eth_call(dev.token, encode_call(TEST_TOKEN, "balanceOf", holder))
    return int.from_bytes(raw[:32], "big")


async def status_of(app: RunningApp, owner: LocalAccount, headers: dict[str, str], pk: str) -> Any:
    answer = await app.http.get(
        "/integration/subscriptions/status",
        params={"ownerAddress": owner.address, "id": pk},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["subscription"]


async def authorized(app: RunningApp, payer: LocalAccount, created: dict[str, Any]) -> None:
    """The payer signs the subscription and posts the signature: period 0 is charged."""
    signature = "0x" + sign_typed(payer.key, created["authorization"]["typedData"]).hex()
    answer = await app.http.post(
        f"/subscribe/{created['id']}/authorization", json={"signature": signature}
    )
    assert answer.status_code == 200, answer.text
