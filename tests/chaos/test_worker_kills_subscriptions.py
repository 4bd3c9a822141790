"""Scenario: subscriptions charged by the worker processes while they are SIGKILLed with a
charge in flight (its period's invoice created and its transaction not yet confirmed), many
times. The chain's clock moves one period per round (``evm_increaseTime``); at the end every
period of every subscription is charged exactly once and none is skipped: the contract's
bitmap (``isCharged``) is the truth, the payers paid exactly one amount per period, and the
service wrote one charge and one ``subscription.charged`` event per period. The money
followed the invoices: each payer's token transfers (the chain's ``Transfer`` logs) went one
amount per period, each into the escrow of that period's salt, which is the payment address
of that period's invoice, paid; the owner has no other invoice; and the relayer sent each
period's charge once (one confirmed authorization per period, none reverted on chain).

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
from invoicing.chain.escrows import escrow_address
from invoicing.chain.transfers import TRANSFER_TOPIC, topic_of
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.payments.subscriptions.models import (
    ChargeStatus,
    Subscription,
    SubscriptionCharge,
)
from invoicing.payments.subscriptions.service import terms_of
from invoicing.payments.subscriptions.terms import period_salt
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event
from invoicing.tables.relay import AuthorizationStatus, GaslessOptIn, RelayedAuthorization
from invoicing.tables.settlement import RelayerTransaction, TxStatus
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
PAID = (InvoiceStatus.PAID, InvoiceStatus.COMPLETED)


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


async def not_charged(topology: Topology, pks: list[str], period: int) -> str:
    """Which subscriptions have ``period`` not charged on chain, with the service's view."""
    lines = []
    async with topology.db.sessions() as session:
        for pk in pks:
            if await charged_on_chain(topology, pk, period):
                continue
            sub = await session.get(Subscription, pk)
            charge = await session.get(SubscriptionCharge, (pk, period))
            assert sub is not None
            lines.append(
                f"subscription {pk}: period {period} not charged on chain; next_period "
                f"{sub.next_period}, status {sub.status}, its charge "
                f"{None if charge is None else (charge.status, charge.tx_hash)}"
            )
    return "; ".join(lines)


async def all_charged(topology: Topology, pks: list[str], period: int) -> bool:
    for pk in pks:
        if not await charged_on_chain(topology, pk, period):
            return False
    return True


async def subscription(topology: Topology, pk: str) -> Subscription:
    async with topology.db.sessions() as session:
        sub = await session.get(Subscription, pk)
    assert sub is not None and sub.payer is not None
    return sub


def period_salts(sub: Subscription) -> list[bytes]:
    """The escrow salt of each period, and of one more (never charged)."""
    assert sub.payer is not None
    subscription_id = terms_of(sub).id_of(sub.payer)
    return [period_salt(subscription_id, period) for period in range(ROUNDS + 2)]


async def transfers_from(topology: Topology, payer: str) -> list[tuple[str, int]]:
    """Every token transfer out of ``payer`` on chain: (recipient, raw amount)."""
    logs = await topology.evm.call_rpc(
        "eth_getLogs",
        [
            {
                "address": topology.dev.token,
                "fromBlock": "0x0",
                "toBlock": "latest",
                "topics": [TRANSFER_TOPIC, topic_of(payer)],
            }
        ],
    )
    return [("0x" + log["topics"][2][-40:], int(log["data"], 16)) for log in logs]


async def invoices_paid(topology: Topology, owner: str) -> bool:
    async with topology.db.sessions() as session:
        unpaid = await session.scalar(
            select(func.count())
            .select_from(Invoice)
            .where(Invoice.owner_key == owner.lower(), Invoice.status.not_in(PAID))
        )
    return not unpaid


async def relayed(topology: Topology, payers: list[LocalAccount]) -> list[tuple[str, ...]]:
    """The payers' authorizations the relayer sent: (payer, nonce, its status, its
    transaction's status)."""
    async with topology.db.sessions() as session:
        rows = await session.execute(
            select(
                RelayedAuthorization.payer,
                RelayedAuthorization.nonce,
                RelayedAuthorization.status,
                RelayerTransaction.status,
            )
            .join(RelayerTransaction, RelayerTransaction.id == RelayedAuthorization.relayer_tx_id)
            .where(RelayedAuthorization.payer.in_([p.address for p in payers]))
        )
    return [tuple(row) for row in rows]


async def assert_money_followed_the_invoices(
    topology: Topology, owner: str, pks: list[str], payers: list[LocalAccount]
) -> None:
    """On chain, each payer paid one amount per period into that period's escrow; each is
    the payment address of its period's invoice, which is paid; the owner has no other
    invoice; the relayer sent each period's charge once."""
    async with topology.db.sessions() as session:
        escrow_of = {
            invoice_pk: address
            for invoice_pk, address in await session.execute(
                select(Invoice.id, Invoice.payment_address).where(
                    Invoice.owner_key == owner.lower()
                )
            )
        }
        charges = list(
            await session.scalars(
                select(SubscriptionCharge).where(SubscriptionCharge.subscription_pk.in_(pks))
            )
        )
    assert sorted(c.invoice_pk for c in charges) == sorted(escrow_of), "an invoice of no charge"
    sent = await relayed(topology, payers)
    for pk, payer in zip(pks, payers, strict=True):
        salts = period_salts(await subscription(topology, pk))
        escrows = [escrow_address(topology.dev.factory, owner, salt).lower() for salt in salts]
        into = [
            (escrows.index(to) if to in escrows else None, raw)
            for to, raw in await transfers_from(topology, payer.address)
        ]
        assert into == [(period, AMOUNT_RAW) for period in range(ROUNDS + 1)], (
            f"subscription {pk}: the payer's transfers on chain, (period whose escrow "
            f"received it, or None for any other address; amount): {into}"
        )
        by_period = {c.period: c.invoice_pk for c in charges if c.subscription_pk == pk}
        invoiced = [escrow_of[by_period[period]].lower() for period in range(ROUNDS + 1)]
        assert invoiced == escrows[: ROUNDS + 1], (
            f"subscription {pk}: each period's invoice escrow {invoiced}, charged into "
            f"{escrows[: ROUNDS + 1]}"
        )
        confirmed = sorted(
            nonce
            for who, nonce, status, _tx in sent
            if who == payer.address and status == AuthorizationStatus.CONFIRMED
        )
        expected = sorted("0x" + salt.hex() for salt in salts[: ROUNDS + 1])
        assert confirmed == expected, f"subscription {pk}: charges confirmed {confirmed}"
    reverted = [row for row in sent if row[3] == TxStatus.FAILED]
    assert reverted == [], f"charges sent again and reverted on chain: {reverted}"

    async def paid() -> bool:
        return await invoices_paid(topology, owner)

    await wait_until(paid, 120, "every charge's invoice paid", topology)


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

        async def behind(period: int = period) -> object:
            return await not_charged(topology, pks, period)

        await wait_until(period_charged, 120, f"period {period} charged", topology, behind)

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
    await assert_money_followed_the_invoices(topology, owner, pks, payers)
    assert topology.exited() == []
    assert kills_in_flight >= MIN_IN_FLIGHT, kills_in_flight
    record_property(
        SUMMARY,
        f"chaos subscription kills: {SUBSCRIPTIONS_N} subscriptions x {ROUNDS + 1} periods, "
        f"{ROUNDS} rounds of kills, {kills_in_flight} with a charge in flight; each period "
        "charged once on chain, none skipped",
    )
