"""Concurrent status lookups over real HTTP share their live re-checks, and stay live."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PATH = "/integration/invoices"
PAYER = DEV_PRIVATE_KEYS[7]
NATIVE_PRICE = 10**16  # "0.01"
TOKEN_PRICE = 10_000_000  # "10" TUSD


class Owner:
    def __init__(self, app: RunningApp, dev: DevDeployment, address: str, key: str) -> None:
        self.app, self.dev, self.address, self.key = app, dev, address, key

    async def create(self, **fields: Any) -> dict[str, Any]:
        body = {"ownerAddress": self.address, "chainId": self.dev.chain_id, **fields}
        response = await self.app.http.post(PATH, json=body, headers=key_headers(self.key))
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    async def status(self, payment_address: str) -> dict[str, Any]:
        response = await self.app.http.get(
            f"{PATH}/status",
            params={"ownerAddress": self.address, "paymentAddress": payment_address},
            headers=key_headers(self.key),
        )
        assert response.status_code == 200, response.text
        invoice: dict[str, Any] = response.json()["invoice"]
        return invoice


@pytest.fixture
async def owner(app: RunningApp, dev: DevDeployment) -> Owner:
    account = new_owner()
    return Owner(app, dev, account.address, await issue_api_key(app.services, account))


def rpc_calls(app: RunningApp, dev: DevDeployment) -> int:
    """JSON-RPC requests the app has sent so far (the client's own counter)."""
    gateway = app.services.chains.get(dev.chain_id)
    assert isinstance(gateway, EvmGateway)
    return gateway.evm.rpc.calls


async def pay(evm: EvmClient, dev: DevDeployment, invoice: dict[str, Any], raw: int) -> None:
    escrow = invoice["paymentAddress"]
    if invoice["tokenAddress"] is None:
        await evm.transact(PAYER, escrow, b"", value=raw)
    else:
        await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, raw))


async def test_concurrent_lookups_of_many_invoices_share_chain_reads(
    app: RunningApp, owner: Owner, dev: DevDeployment, evm: EvmClient
) -> None:
    native = [await owner.create(amount="0.01") for _ in range(6)]
    tokens = [await owner.create(amount="10", tokenAddress=dev.token) for _ in range(6)]
    expected: dict[str, tuple[str, int]] = {}
    for invoices, price in ((native, NATIVE_PRICE), (tokens, TOKEN_PRICE)):
        for i, invoice in enumerate(invoices):
            paid_raw = [price, price // 2, 0][i % 3]
            if paid_raw:
                await pay(evm, dev, invoice, paid_raw)
            status = "paid" if paid_raw == price else "pending"
            expected[invoice["paymentAddress"]] = (status, paid_raw)
    asked = [address for address in expected for _ in range(2)]  # every invoice twice
    before_calls = rpc_calls(app, dev)
    started_ms = app.services.clock.now_ms()

    answers = await asyncio.gather(*(owner.status(address) for address in asked))

    calls = rpc_calls(app, dev) - before_calls
    for address, answer in zip(asked, answers, strict=True):
        assert answer["paymentAddress"] == address
        assert (answer["status"], int(answer["balanceRaw"])) == expected[address]
        assert answer["paid"] is (expected[address][0] == "paid")
        assert answer["lastCheckedAt"] >= started_ms
    # Unshared, every lookup costs a head read and a balance read: 48 calls here.
    assert 2 <= calls < len(asked)


@contextlib.asynccontextmanager
async def busy_lookups(owner: Owner, addresses: list[str]) -> AsyncIterator[None]:
    """Keep status lookups of ``addresses`` in flight, so re-checks are always being read."""
    stop = asyncio.Event()

    async def loop(address: str) -> None:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                await owner.status(address)

    tasks = [asyncio.create_task(loop(address)) for address in addresses for _ in range(3)]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def test_a_payment_mined_just_before_a_lookup_is_seen_by_it(
    owner: Owner, dev: DevDeployment, evm: EvmClient
) -> None:
    invoices = [await owner.create(amount="0.01") for _ in range(4)]
    invoices += [await owner.create(amount="10", tokenAddress=dev.token) for _ in range(4)]

    async with busy_lookups(owner, [invoice["paymentAddress"] for invoice in invoices]):
        for invoice in invoices:
            price = TOKEN_PRICE if invoice["tokenAddress"] else NATIVE_PRICE
            await pay(evm, dev, invoice, price)  # returns once the payment is mined
            answer = await owner.status(invoice["paymentAddress"])

            assert (answer["status"], answer["balanceRaw"]) == ("paid", str(price))
