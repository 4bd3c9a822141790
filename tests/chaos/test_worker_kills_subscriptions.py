"""Scenario: subscriptions charged by the worker processes while they are SIGKILLed with a
charge in flight (its period's invoice created and its transaction not yet confirmed), many
times. The chain's clock moves one period per round (``evm_increaseTime``); at the end every
period of every subscription is charged exactly once and none is skipped: the contract's
bitmap (``isCharged``) is the truth, the payers paid exactly one amount per period, and the
service wrote one charge and one ``subscription.charged`` event per period.

It runs last in the package (its name): it leaves the chain's clock minutes ahead."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import SUBSCRIPTIONS, TEST_TOKEN
from invoicing.chain.deploy import subscriptions_address
from invoicing.payments.subscriptions.models import (
    ChargeStatus,
    Subscription,
    SubscriptionCharge,
)
from invoicing.payments.subscriptions.service import terms_of
from invoicing.tables.notifications import Event
from invoicing.tables.relay import GaslessOptIn
from tests.chaos.conftest import CHAOS, SUMMARY
from tests.chaos.topology import Topology, wait_until
from tests.conftest import RecordProperty
from tests.support.factory import sign_typed
from tests.support.signing import new_owner

pytestmark = CHAOS

SUBSCRIPTIONS_N = 3
ROUNDS = 12  # periods after period 0; one kill per round
PERIOD_S = 60
AMOUNT_RAW = 1_000_000  # 1 TUSD
HELD_RAW = 100 * AMOUNT_RAW
MIN_IN_FLIGHT = ROUNDS // 2


async def opt_in(topology: Topology, owner: str) -> None:
    async with topology.db.transaction() as session:
        session.add(
            GaslessOptIn(
                owner_key=owner.lower(),
                chain_id=topology.dev.chain_id,
                enabled=True,
                updated_at=int(time.time() * 1000),
            )
        )


async def funded_payer(topology: Topology) -> LocalAccount:
    payer: LocalAccount = Account.create()
    evm, token = topology.evm, topology.dev.token
    await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**18)])
    for data in (
        encode_call(TEST_TOKEN, "mint", payer.address, HELD_RAW),
        encode_call(TEST_TOKEN, "approve", subscriptions_address(), 2**256 - 1),
    ):
        assert (await evm.transact(payer.key.hex(), token, data))["status"] == 1
    return payer


async def subscribe(topology: Topology, key: str, owner: str, payer: LocalAccount) -> str:
    api = topology.apis[0].http
    body = {
        "ownerAddress": owner,
        "chainId": topology.dev.chain_id,
        "tokenAddress": topology.dev.token,
        "amount": "1",
        "periodSeconds": PERIOD_S,
        # Finished after the last round: the chain's clock also runs between the rounds.
        "maxPeriods": ROUNDS + 1,
    }
    created = await api.post(
        "/integration/subscriptions", json=body, headers={"x-service-api-key": key}
    )
    assert created.status_code == 201, created.text
    typed = created.json()["authorization"]["typedData"]
    signature = "0x" + sign_typed(payer.key, typed).hex()
    pk = str(created.json()["id"])
    answer = await topology.apis[1].http.post(
        f"/subscribe/{pk}/authorization", json={"signature": signature}
    )
    assert answer.status_code == 200, answer.text
    return pk


async def charged_on_chain(topology: Topology, pk: str, period: int) -> bool:
    async with topology.db.sessions() as session:
        sub = await session.get(Subscription, pk)
    assert sub is not None and sub.payer is not None
    subscription_id = terms_of(sub).id_of(sub.payer)
    data = encode_call(SUBSCRIPTIONS, "isCharged", subscription_id, period)
    raw = await topology.evm.eth_call(subscriptions_address(), data)
    return int.from_bytes(raw[:32], "big") == 1


async def in_flight(topology: Topology, pks: list[str]) -> int:
    """Charges whose invoice exists and whose transaction is not confirmed yet."""
    async with topology.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(SubscriptionCharge)
            .where(
                SubscriptionCharge.subscription_pk.in_(pks),
                (SubscriptionCharge.status.is_(None))
                | (SubscriptionCharge.status == ChargeStatus.SUBMITTED),
            )
        )
    return int(count or 0)


async def later_and_wait(topology: Topology, check: Callable[[], Awaitable[bool]]) -> None:
    """One more period of the chain's clock (the worker then sees maxPeriods reached), and
    ``check`` within two minutes."""
    await topology.evm.call_rpc("evm_increaseTime", [PERIOD_S])
    await topology.evm.call_rpc("evm_mine", [])
    await wait_until(check, 120, "every subscription finished, every charge confirmed", topology)


async def all_charged(topology: Topology, pks: list[str], period: int) -> bool:
    for pk in pks:
        if not await charged_on_chain(topology, pk, period):
            return False
    return True


@pytest.mark.timeout(1200)
async def test_no_period_charged_twice_or_skipped_while_workers_are_killed(
    topology: Topology, record_property: RecordProperty
) -> None:
    owner = new_owner().address
    key = await topology.api_key(owner)
    await opt_in(topology, owner)
    payers = [await funded_payer(topology) for _ in range(SUBSCRIPTIONS_N)]
    pks = [await subscribe(topology, key, owner, payer) for payer in payers]
    rng = random.Random(35)
    kills_in_flight = 0
    for period in range(1, ROUNDS + 1):
        await topology.evm.call_rpc("evm_increaseTime", [PERIOD_S])
        await topology.evm.call_rpc("evm_mine", [])
        # Kill as soon as a charge of this period is in flight (or after a random wait).
        for _ in range(rng.randint(10, 60)):
            if await in_flight(topology, pks):
                break
            await asyncio.sleep(0.05)
        kills_in_flight += bool(await in_flight(topology, pks))
        for worker in rng.sample(topology.workers, rng.choice((1, 2))):
            worker.kill()
            worker.start()

        async def period_charged(period: int = period) -> bool:
            return await all_charged(topology, pks, period)

        await wait_until(period_charged, 120, f"period {period} charged", topology)

    async def all_finished() -> bool:
        async with topology.db.sessions() as session:
            statuses = set(
                await session.scalars(select(Subscription.status).where(Subscription.id.in_(pks)))
            )
        return statuses == {"finished"} and await in_flight(topology, pks) == 0

    await later_and_wait(topology, all_finished)
    for pk, payer in zip(pks, payers, strict=True):
        for period in range(ROUNDS + 1):
            assert await charged_on_chain(topology, pk, period), (pk, period)
        assert not await charged_on_chain(topology, pk, ROUNDS + 1)
        raw = await topology.evm.eth_call(
            topology.dev.token, encode_call(TEST_TOKEN, "balanceOf", payer.address)
        )
        assert int.from_bytes(raw[:32], "big") == HELD_RAW - (ROUNDS + 1) * AMOUNT_RAW
    async with topology.db.sessions() as session:
        subs = {
            sub.id: sub
            for sub in await session.scalars(select(Subscription).where(Subscription.id.in_(pks)))
        }
        charges = list(
            await session.execute(
                select(SubscriptionCharge.subscription_pk, SubscriptionCharge.period)
                .where(SubscriptionCharge.subscription_pk.in_(pks))
                .order_by(SubscriptionCharge.subscription_pk, SubscriptionCharge.period)
            )
        )
        charged_events = list(
            await session.scalars(
                select(Event.data).where(
                    Event.owner_key == owner.lower(), Event.type == "subscription.charged"
                )
            )
        )
    assert {sub.status for sub in subs.values()} == {"finished"}
    assert {sub.next_period for sub in subs.values()} == {ROUNDS + 1}
    assert {sub.failed_periods for sub in subs.values()} == {0}
    assert [tuple(row) for row in charges] == [
        (pk, period) for pk in sorted(pks) for period in range(ROUNDS + 1)
    ]
    seen = sorted((d["subscription"]["id"], d["subscription"]["period"]) for d in charged_events)
    assert seen == [(pk, period) for pk in sorted(pks) for period in range(ROUNDS + 1)]
    assert topology.exited() == []
    assert kills_in_flight >= MIN_IN_FLIGHT, kills_in_flight
    record_property(
        SUMMARY,
        f"chaos subscription kills: {SUBSCRIPTIONS_N} subscriptions x {ROUNDS + 1} periods, "
        f"{ROUNDS} rounds of kills, {kills_in_flight} with a charge in flight; each period "
        "charged once on chain, none skipped",
    )
