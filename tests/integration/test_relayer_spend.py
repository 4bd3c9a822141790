"""Attacks on the relayer's gas money, on anvil through real HTTP: a contract wallet
whose signature check burns gas, one signed request posted many times (to two API processes),
an owner's daily budget, a relayer short of funds (degraded, withdrawals wait), and a
withdrawal whose fees reach the chain's ceiling."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import load_artifact
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.clock import FakeClock
from invoicing.services import Services
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import (
    MetaTransaction,
    OwnerSetAside,
    RelayerSpend,
    RelayerTransaction,
    TxStatus,
)
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    deploy_blocking_token,
    gateway,
    paid_in,
    paid_invoice,
    parked_of,
    relayer_of,
    reload,
    settle_all,
    sign_typed,
    with_token,
)

pytestmark = pytest.mark.integration

RELAYER = Account.from_key(DEV_PRIVATE_KEYS[0]).address
OTHER_KEY = DEV_PRIVATE_KEYS[8]  # deploys the hostile wallet, tops the relayer up
DAY_MS = 86_400_000

StartApps = Callable[..., Any]


def far_clock() -> FakeClock:
    """A clock minutes of its own, years ahead: the per-minute limits of the client routes
    then count only this test's requests (deadlines ahead of it are ahead of anvil's too)."""
    now_ms = int(time.time() * 1000) + random.randrange(5, 50) * 365 * DAY_MS
    return FakeClock(now_ms - now_ms % 60_000 + 1_000)


@pytest.fixture
async def start_apps(make_services: MakeServices) -> AsyncIterator[StartApps]:
    """``await start_apps(n, **settings)``: n API processes (own engines and servers) on the
    test database and anvil, sharing one far-ahead clock."""
    async with AsyncExitStack() as stack:

        async def start(count: int = 1, **overrides: Any) -> list[RunningApp]:
            clock = far_clock()
            apps = []
            for _ in range(count):
                services = await make_services(**overrides)
                services.clock = clock
                base_url = await stack.enter_async_context(serve(create_app(services)))
                http = await stack.enter_async_context(
                    httpx.AsyncClient(base_url=base_url, timeout=30)
                )
                apps.append(RunningApp(base_url, services, http))
            return apps

        yield start


@pytest.fixture
async def manual_mining(evm: EvmClient) -> AsyncIterator[None]:
    await evm.call_rpc("evm_setAutomine", [False])
    try:
        yield
    finally:
        await evm.call_rpc("evm_setAutomine", [True])
        await evm.call_rpc("evm_mine")


def deadline_of(app: RunningApp) -> int:
    return app.services.clock.now_ms() // 1000 + 600


def set_fee_body(
    app: RunningApp, dev: DevDeployment, owner: LocalAccount, fee_bps: int, nonce: int
) -> dict[str, Any]:
    deadline = deadline_of(app)
    typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, fee_bps, nonce, deadline)
    return {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "feeBps": fee_bps,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner, typed).hex(),
    }


async def relayer_rows(services: Services) -> int:
    async with services.db.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(RelayerTransaction)) or 0)


async def meta_rows(services: Services, owner: str) -> int:
    async with services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(MetaTransaction)
            .where(MetaTransaction.owner_key == owner.lower())
        )
        return int(count or 0)


async def test_a_wallet_whose_signature_check_burns_gas_is_refused_and_nothing_is_sent(
    start_apps: StartApps, evm: EvmClient, dev: DevDeployment
) -> None:
    (app,) = await start_apps()
    wallet = await deploy_contract(evm, OTHER_KEY, load_artifact("GasBurnerWallet").bytecode)
    body = {
        "ownerAddress": wallet,
        "chainId": dev.chain_id,
        "feeBps": 100,
        "nonce": "0",
        "deadline": str(deadline_of(app)),
        "signature": "0x" + "01" * 66,  # any 66 bytes: the wallet calls every signature valid
    }
    sent_before = await evm.get_transaction_count(RELAYER, "pending")
    balance_before = await evm.get_balance(RELAYER)
    rows_before = await relayer_rows(app.services)

    answers = [await app.http.post("/fees/set-meta", json=body) for _ in range(3)]

    assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [
        (400, "invalid_owner_signature")
    ] * 3
    assert await evm.get_transaction_count(RELAYER, "pending") == sent_before
    assert await evm.get_balance(RELAYER) == balance_before
    assert await relayer_rows(app.services) == rows_before
    assert await meta_rows(app.services, wallet) == 0
    assert await gateway(app.services).factory_nonce(wallet) == 0


async def test_one_signed_request_posted_many_times_to_two_processes_sends_one_transaction(
    start_apps: StartApps, evm: EvmClient, dev: DevDeployment, manual_mining: None
) -> None:
    first, second = await start_apps(2)
    owner = new_owner()
    body = set_fee_body(first, dev, owner, 100, 0)
    sent_before = await evm.get_transaction_count(RELAYER, "pending")
    rows_before = await relayer_rows(first.services)

    together = await asyncio.gather(
        first.http.post("/fees/set-meta", json=body),
        second.http.post("/fees/set-meta", json=body),
        first.http.post("/fees/set-meta", json=body),
    )
    later = await second.http.post("/fees/set-meta", json=body)
    other = await first.http.post("/fees/set-meta", json=set_fee_body(first, dev, owner, 200, 0))

    answers = [*together, later]
    assert [a.status_code for a in answers] == [202] * 4, [a.text for a in answers]
    tx_hash = answers[0].json()["txHash"]
    assert {a.json()["txHash"] for a in answers} == {tx_hash}
    assert (other.status_code, other.json()["error"]["code"]) == (409, "nonce_mismatch")
    assert other.json()["error"]["details"] == {"expected": "1"}
    assert await evm.get_transaction_count(RELAYER, "pending") == sent_before + 1
    assert await relayer_rows(first.services) == rows_before + 1

    # Mined, not yet followed to the end by the tracker: still the same transaction.
    await evm.call_rpc("evm_mine")
    mined = await second.http.post("/fees/set-meta", json=body)
    assert (mined.status_code, mined.json()["txHash"]) == (202, tx_hash)
    # Confirmed: the nonce is used, so the request is stale.
    finished = await settle_all(first.services)
    stale = await first.http.post("/fees/set-meta", json=body)

    assert [(r.tx_hash, r.status) for r in finished if r.tx_hash == tx_hash] == [
        (tx_hash, TxStatus.CONFIRMED)
    ]
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "nonce_mismatch")
    assert stale.json()["error"]["details"] == {"expected": "1"}
    assert await gateway(first.services).fee_settings(owner.address) == (100, None)
    assert await relayer_rows(first.services) == rows_before + 1


async def test_an_owner_gets_a_daily_budget_of_relayed_transactions_across_processes(
    start_apps: StartApps, evm: EvmClient, dev: DevDeployment
) -> None:
    first, second = await start_apps(2, relayer_meta_per_owner_per_day=2)
    owner = new_owner()
    used = []
    for nonce, app in enumerate((first, second)):
        answer = await app.http.post(
            "/fees/set-meta", json=set_fee_body(app, dev, owner, 10, nonce)
        )
        assert answer.status_code == 202, answer.text
        await evm.wait_for_receipt(answer.json()["txHash"])
        used.append(answer)
    sent_before = await evm.get_transaction_count(RELAYER, "pending")
    rows_before = await relayer_rows(first.services)

    refused = [
        await app.http.post("/fees/set-meta", json=set_fee_body(app, dev, owner, 20, 2))
        for app in (first, second)
    ]

    now_ms = first.services.clock.now_ms()
    until_tomorrow_s = -(-(DAY_MS - now_ms % DAY_MS) // 1000)
    for answer in refused:
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"]["code"] == "rate_limited"
        assert answer.json()["error"]["details"] == {"retryAfterS": until_tomorrow_s}
        assert answer.headers["retry-after"] == str(until_tomorrow_s)
    assert await evm.get_transaction_count(RELAYER, "pending") == sent_before
    assert await relayer_rows(first.services) == rows_before
    assert await gateway(first.services).factory_nonce(owner.address) == 2
    # Another owner's budget is its own.
    stranger = new_owner()
    other = await second.http.post("/fees/set-meta", json=set_fee_body(second, dev, stranger, 5, 0))
    assert other.status_code == 202, other.text
    await settle_all(first.services)


async def test_a_relayer_short_of_funds_degrades_its_chain_and_withdrawals_wait(
    make_services: MakeServices,
    evm: EvmClient,
    dev: DevDeployment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    balance = await evm.get_balance(RELAYER)
    threshold = balance + 10**18
    services = await make_services(chain={"relayer_min_balance": threshold})
    owner = new_owner().address
    invoice = await paid_invoice(services, evm, owner, "0.007")
    chain, relayer = gateway(services), relayer_of(services)
    rows_before = await relayer_rows(services)
    key = f"chain:{dev.chain_id}"

    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        with caplog.at_level(logging.WARNING, logger="invoicing.settlement.relayer"):
            short = await http.get("/readyz")
            waited = await plan_withdrawals(
                services, chain, relayer, full=True, owner_key=owner.lower()
            )
            short_again = await http.get("/readyz")
        reason = (
            f"relayer {RELAYER} balance {balance} wei is below the threshold {threshold} wei; "
            "withdrawals wait until it is topped up"
        )
        assert short.status_code == 200
        assert short.json() == {
            "ready": True,
            "checks": {"database": "ok", key: "degraded"},
            "degraded": {key: reason},
        }
        assert short_again.json() == short.json()
        assert waited == []
        assert await relayer_rows(services) == rows_before
        assert (await reload(services, invoice.id)).status == "paid"
        assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
            f"relayer chain {dev.chain_id}: {reason}"
        ]

        top_up = await evm.transact(OTHER_KEY, RELAYER, value=2 * 10**18)
        assert top_up["status"] == 1
        funded = await http.get("/readyz")
        sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())
        await settle_all(services)

    assert funded.json() == {"ready": True, "checks": {"database": "ok", key: "ok"}}
    assert len(sent) == 1
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 7 * 10**15


async def test_a_withdrawal_at_the_fee_ceiling_waits_there_and_is_mined_later(
    make_services: MakeServices, evm: EvmClient, manual_mining: None
) -> None:
    await evm.call_rpc("evm_setAutomine", [True])
    owner = new_owner().address
    invoice = await paid_invoice(await make_services(), evm, owner, "0.008")
    await evm.call_rpc("evm_setAutomine", [False])  # no new block, so no new base fee
    market_max_fee, _tip = await evm.fee_caps()
    services = await make_services(
        relayer_resend_after_s=30, chain={"max_fee_per_gas": market_max_fee}
    )
    clock = FakeClock(services.clock.now_ms())
    services.clock = clock
    chain, relayer = gateway(services), relayer_of(services)
    (sent,) = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())

    for _ in range(3):  # overdue each time, and no bump fits under the ceiling
        clock.advance(30_000)
        assert await track_pending(services, chain, relayer) == []
    waiting = await row_of(services, sent.id)
    await evm.call_rpc("evm_mine")
    finished = await track_pending(services, chain, relayer)

    assert sent.max_fee_per_gas == str(market_max_fee)
    assert (waiting.hashes, waiting.attempts) == ([sent.tx_hash], 1)
    assert waiting.fee_ceiling_at == clock.now_ms() - 60_000
    assert [(r.id, r.status, r.mined_hash) for r in finished] == [
        (sent.id, TxStatus.CONFIRMED, sent.tx_hash)
    ]
    assert (await reload(services, invoice.id)).status == "completed"
    assert await balance_of(evm, owner) == 8 * 10**15


async def row_of(services: Services, row_id: str) -> RelayerTransaction:
    async with services.db.sessions() as session:
        row = await session.get(RelayerTransaction, row_id)
        assert row is not None
        return row


async def spend_of(services: Services, chain_id: int) -> dict[str, tuple[int, int]]:
    """The day's relayer spend on ``chain_id`` by share: (transactions, gas limits)."""
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(RelayerSpend).where(
                RelayerSpend.chain_id == chain_id,
                RelayerSpend.day_start_ms == now_ms - now_ms % DAY_MS,
            )
        )
        return {row.share_key: (row.transactions, row.gas) for row in rows}


async def test_a_flood_of_fresh_wallets_shares_one_owners_share_and_never_passes_the_chains(
    start_apps: StartApps,
    make_services: MakeServices,
    evm: EvmClient,
    dev: DevDeployment,
    own_database: str,
) -> None:
    # A database of its own: the chain's daily budget counts every test's relayed
    # transactions, and other tests of the same worker spend on the same day.
    # Owners with an invoice paid on the chain spend their own share.
    established = [new_owner() for _ in range(2)]
    for owner in established:
        services = await make_services(database_url=own_database)
        await paid_invoice(services, evm, owner.address, "0.001")
    (app,) = await start_apps(
        relayer_owner_tx_per_day=3, relayer_chain_tx_per_day=4, database_url=own_database
    )
    sent_before = await evm.get_transaction_count(RELAYER, "pending")
    rows_before = await relayer_rows(app.services)

    # Each fresh wallet signs its first request: a per-wallet budget would take them all.
    flood = [
        await app.http.post("/fees/set-meta", json=set_fee_body(app, dev, new_owner(), 10, 0))
        for _ in range(8)
    ]
    answers = [
        await app.http.post("/fees/set-meta", json=set_fee_body(app, dev, owner, 10, 0))
        for owner in established
    ]

    now_ms = app.services.clock.now_ms()
    until_tomorrow_s = -(-(DAY_MS - now_ms % DAY_MS) // 1000)
    assert [a.status_code for a in flood] == [202] * 3 + [429] * 5, [a.text for a in flood]
    for refused in flood[3:]:
        assert refused.json()["error"]["code"] == "rate_limited"
        assert refused.json()["error"]["details"] == {"retryAfterS": until_tomorrow_s}
    # The first established owner fits in the chain's four; the second does not.
    assert [a.status_code for a in answers] == [202, 429], [a.text for a in answers]
    assert "chain" in answers[1].json()["error"]["message"]
    assert await evm.get_transaction_count(RELAYER, "pending") == sent_before + 4
    assert await relayer_rows(app.services) == rows_before + 4
    spend = await spend_of(app.services, dev.chain_id)
    assert {share: count for share, (count, _gas) in spend.items()} == {
        "*": 4,
        "newcomers": 3,
        established[0].address.lower(): 1,
    }
    gas_limit = app.services.settings.relayer_meta_gas_limit
    assert spend["*"][1] <= 4 * gas_limit
    await settle_all(app.services)


async def test_a_sweep_mined_reverted_parks_its_escrows_and_sets_its_owner_aside(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    token = await deploy_blocking_token(evm)
    services = await make_services(chain=with_token(dev, token))
    clock = FakeClock(services.clock.now_ms())
    services.clock = clock
    owner = new_owner().address
    invoices = [await paid_in(services, evm, owner, amount, token) for amount in ("1", "2")]
    chain, relayer = gateway(services), relayer_of(services)
    code = await evm.call_rpc("eth_getCode", [token, "latest"])
    await evm.call_rpc("evm_setAutomine", [False])
    try:
        # Simulated against the token as it is; mined after it changed: every call reverts.
        (sweep,) = await plan_withdrawals(
            services, chain, relayer, full=True, owner_key=owner.lower()
        )
        await evm.call_rpc("anvil_setCode", [token, "0x60006000fd"])
        await evm.call_rpc("evm_mine")
    finally:
        await evm.call_rpc("anvil_setCode", [token, code])
        await evm.call_rpc("evm_setAutomine", [True])
    reverted_at = clock.now_ms()
    finished = await settle_all(services)
    again = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner.lower())

    assert [(r.id, r.status) for r in finished if r.id == sweep.id] == [(sweep.id, "failed")]
    assert again == []
    parked = await parked_of(services, owner)
    retry_ms = int(services.settings.withdrawal_park_retry_s * 1000)
    assert sorted((p.invoice_id, p.kind, p.attempts, p.next_retry_at) for p in parked) == sorted(
        (i.id, "failing", 1, reverted_at + retry_ms) for i in invoices
    )
    assert {p.reason for p in parked} == {f"the mined sweep {sweep.tx_hash} reverted"}
    async with services.db.sessions() as session:
        held = await session.get(OwnerSetAside, (dev.chain_id, owner.lower()))
    assert held is not None
    retry_s = services.settings.relayer_owner_revert_retry_s
    assert (held.reverts, held.next_retry_at) == (1, reverted_at + int(retry_s * 1000))
    assert [(await reload(services, i.id)).status for i in invoices] == ["paid", "paid"]
