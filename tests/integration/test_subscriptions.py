"""Subscriptions on anvil over real HTTP: an owner creates one, a payer approves the
contract and signs once, period 0 is charged at once and each later period when the
chain's time reaches it, each into its own invoice escrow; a cancellation (the payer's on
chain, the owner's through the API) stops every charge; a revoked allowance is retried,
then past due."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import SUBSCRIPTIONS, TEST_TOKEN
from invoicing.chain.deploy import DevDeployment, subscriptions_address
from invoicing.chain.evm import EvmClient
from invoicing.invoices.views import webhook_payload
from invoicing.payments.opt_in import set_gasless
from invoicing.payments.subscriptions.periods import charge_due_once
from invoicing.payments.subscriptions.service import find_subscription, terms_of
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event
from tests.conftest import RunningApp
from tests.support.api import signed_get
from tests.support.events import record_then_deliver_due
from tests.support.factory import sign_typed
from tests.support.gasless import funded_payer
from tests.support.receiver import Receiver
from tests.support.signing import signed_headers
from tests.support.subscriptions import (
    AMOUNT_RAW,
    PERIOD_S,
    authorized,
    charges_sent,
    event_types,
    later,
    own_chain,
    status_of,
    subscribed,
    token_balance,
)
from tests.support.withdrawals import settle_all

pytestmark = pytest.mark.integration


# A chain of its own (see own_chain).
anvil, evm, dev = own_chain(31_338)


async def each_charge_names_its_period(
    app: RunningApp,
    owner: LocalAccount,
    headers: dict[str, str],
    created: dict[str, Any],
    escrows: list[str],
) -> None:
    """Each charge's invoice carries ``subscription`` in the status lookup, the list, its
    ``invoice.paid`` event and the paid webhook's body; an owner's own invoice whose metadata
    says the same does not."""
    pk, chain_id = created["id"], created["chainId"]
    for period, escrow in enumerate(escrows):
        answer = await app.http.get(
            "/integration/invoices/status",
            params={"ownerAddress": owner.address, "paymentAddress": escrow},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        invoice = answer.json()["invoice"]
        assert invoice["status"] == "paid"
        assert invoice["subscription"] == {"id": pk, "period": period}
        assert invoice["metadata"] == {"subscription": {"id": pk, "period": period}}
    mimic = {"ownerAddress": owner.address, "chainId": chain_id, "amount": "1"}
    mimic["metadata"] = {"subscription": {"id": pk, "period": 7}}
    made = await app.http.post("/integration/invoices", json=mimic, headers=headers)
    assert made.status_code == 201, made.text
    assert "subscription" not in made.json()
    listed = await app.http.get(
        "/integration/invoices",
        params={"ownerAddress": owner.address, "chainId": chain_id, "limit": 10},
        headers=headers,
    )
    found = {item["paymentAddress"]: item.get("subscription") for item in listed.json()["items"]}
    assert found == {
        **{escrow: {"id": pk, "period": period} for period, escrow in enumerate(escrows)},
        made.json()["paymentAddress"]: None,
    }
    async with app.services.db.sessions() as session:
        paid = list(
            await session.scalars(
                select(Event.data)
                .where(Event.owner_key == owner.address.lower(), Event.type == "invoice.paid")
                .order_by(Event.created_at)
            )
        )
        invoices = {
            row.payment_address: row
            for row in await session.scalars(
                select(Invoice).where(Invoice.owner_key == owner.address.lower())
            )
        }
    assert sorted(data["invoice"]["subscription"]["period"] for data in paid) == [0, 1, 2]
    assert webhook_payload(invoices[escrows[1]])["subscription"] == {"id": pk, "period": 1}
    assert "subscription" not in webhook_payload(invoices[made.json()["paymentAddress"]])


async def one_paid_webhook_per_period(
    hooks: Receiver, headers: dict[str, str], pk: str, escrows: list[str]
) -> None:
    """Each period's invoice sent its paid webhook to the subscription's webhookUrl, with
    ``subscription`` and the subscription's creation credential (its API key)."""
    received = hooks.at("/paid")
    assert [(r.body["subscription"], r.body["paymentAddress"]) for r in received] == [
        ({"id": pk, "period": period}, escrow) for period, escrow in enumerate(escrows)
    ]
    assert [(r.body["status"], r.body["paid"]) for r in received] == [("paid", True)] * 3
    assert {r.headers["x-service-api-key"] for r in received} == {headers["x-service-api-key"]}


async def test_three_periods_into_three_escrows_then_the_payer_cancels_on_chain(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, hooks: Receiver
) -> None:
    owner, headers, payer, created = await subscribed(app, evm, dev, webhookUrl=hooks.url("/paid"))
    assert created["webhookUrl"] == hooks.url("/paid")
    assert created["status"] == "awaiting_authorization"
    assert created["amountRaw"] == str(AMOUNT_RAW) and created["periodSeconds"] == PERIOD_S
    assert created["authorization"]["spender"] == subscriptions_address()
    assert "payer" not in created["authorization"]["typedData"]["message"]
    signature = "0x" + sign_typed(payer.key, created["authorization"]["typedData"]).hex()
    path = f"/subscribe/{created['id']}/authorization"

    first = await app.http.post(path, json={"signature": signature})
    again = await app.http.post(path, json={"signature": signature})

    assert first.status_code == 200, first.text
    assert first.json()["subscription"]["status"] == "active"
    assert first.json()["subscription"]["payer"] == payer.address
    assert again.status_code == 200, again.text
    assert await charges_sent(app, owner.address) == 1  # the repeat charged nothing
    await settle_all(app.services)
    for _ in range(2):
        await charge_due_once(app.services)  # not due yet: nothing
        assert await charges_sent(app, owner.address) == len(
            (await status_of(app, owner, headers, created["id"]))["charges"]
        )
        await later(evm, PERIOD_S)
        await charge_due_once(app.services)
        await settle_all(app.services)
    view = await status_of(app, owner, headers, created["id"])
    escrows = [charge["paymentAddress"] for charge in view["charges"]]
    assert [charge["period"] for charge in view["charges"]] == [0, 1, 2]
    assert len(set(escrows)) == 3
    for escrow in escrows:
        assert await token_balance(evm, dev, escrow) == AMOUNT_RAW
    assert await token_balance(evm, dev, payer.address) == 10_000_000 - 3 * AMOUNT_RAW
    assert all(charge["txHash"] for charge in view["charges"])
    assert await charges_sent(app, owner.address) == 3
    await each_charge_names_its_period(app, owner, headers, created, escrows)
    assert view["webhookUrl"] == hooks.url("/paid")
    await record_then_deliver_due(app.services)
    await one_paid_webhook_per_period(hooks, headers, created["id"], escrows)

    # The payer cancels on chain: nothing is charged after, whoever asks.
    sub = await find_subscription(app.services.db, created["id"])
    cancel = encode_call(SUBSCRIPTIONS, "cancel", terms_of(sub).as_tuple(), payer.address)
    assert (await evm.transact(payer.key.hex(), subscriptions_address(), cancel))["status"] == 1
    await later(evm, PERIOD_S)
    await charge_due_once(app.services)
    await charge_due_once(app.services)

    assert (await status_of(app, owner, headers, created["id"]))["status"] == "cancelled"
    assert await charges_sent(app, owner.address) == 3
    assert await token_balance(evm, dev, payer.address) == 10_000_000 - 3 * AMOUNT_RAW
    assert await event_types(app, owner.address) == [
        "subscription.activated",
        "subscription.charged",
        "subscription.charged",
        "subscription.charged",
        "subscription.cancelled",
    ]


async def test_revoked_allowance_is_retried_then_past_due_and_the_owner_cancels(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, make_services: Any
) -> None:
    owner, headers, payer, created = await subscribed(app, evm, dev)
    signature = "0x" + sign_typed(payer.key, created["authorization"]["typedData"]).hex()
    answer = await app.http.post(
        f"/subscribe/{created['id']}/authorization", json={"signature": signature}
    )
    assert answer.status_code == 200, answer.text
    await settle_all(app.services)
    revoke = encode_call(TEST_TOKEN, "approve", subscriptions_address(), 0)
    assert (await evm.transact(payer.key.hex(), dev.token, revoke))["status"] == 1
    services = await make_services(subscription_grace_s=PERIOD_S, subscription_retry_s=1)

    await later(evm, PERIOD_S)
    await charge_due_once(services)  # refused: allowance; tried again later
    assert (await status_of(app, owner, headers, created["id"]))["status"] == "active"
    await asyncio.sleep(1.1)  # the retry delay (server clock)
    await later(evm, PERIOD_S)
    await charge_due_once(services)  # the grace window is over: past due

    view = await status_of(app, owner, headers, created["id"])
    assert view["status"] == "past_due"
    assert view["charges"][1]["chargeStatus"] == "failed"
    assert await charges_sent(app, owner.address) == 1

    gone = await app.http.delete(
        "/integration/subscriptions",
        params={"ownerAddress": owner.address, "id": created["id"]},
        headers=headers,
    )
    again = await app.http.delete(
        "/integration/subscriptions",
        params={"ownerAddress": owner.address, "id": created["id"]},
        headers=headers,
    )
    assert gone.status_code == 200 and again.status_code == 200
    assert gone.json()["subscription"]["status"] == "cancelled"
    approve = encode_call(TEST_TOKEN, "approve", subscriptions_address(), 2**256 - 1)
    assert (await evm.transact(payer.key.hex(), dev.token, approve))["status"] == 1
    await later(evm, 3 * PERIOD_S)
    await charge_due_once(services)

    assert await charges_sent(app, owner.address) == 1
    assert await token_balance(evm, dev, payer.address) == 10_000_000 - AMOUNT_RAW
    assert (await event_types(app, owner.address))[-2:] == [
        "subscription.past_due",
        "subscription.cancelled",
    ]


async def test_max_periods_charged_then_finished_with_an_event_per_move(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, headers, payer, created = await subscribed(app, evm, dev, maxPeriods=2)
    assert "webhookUrl" not in created  # none given: omitted
    await authorized(app, payer, created)
    await settle_all(app.services)
    for _ in range(3):
        await later(evm, PERIOD_S)
        await charge_due_once(app.services)
        await settle_all(app.services)

    view = await status_of(app, owner, headers, created["id"])
    assert view["status"] == "finished"
    assert view["nextChargeAt"] is None
    assert [c["chargeStatus"] for c in view["charges"]] == ["confirmed", "confirmed"]
    assert await charges_sent(app, owner.address) == 2
    assert await token_balance(evm, dev, payer.address) == 10_000_000 - 2 * AMOUNT_RAW
    async with app.services.db.sessions() as session:
        moves = list(
            await session.execute(
                select(Event.type, Event.data)
                .where(Event.owner_key == owner.address.lower(), Event.type.like("subscription.%"))
                .order_by(Event.created_at)
            )
        )
    assert [(kind, data["subscription"].get("period")) for kind, data in moves] == [
        ("subscription.activated", None),
        ("subscription.charged", 0),
        ("subscription.charged", 1),
        ("subscription.finished", None),
    ]
    assert {data["subscription"]["id"] for _kind, data in moves} == {created["id"]}
    assert moves[0][1]["subscription"]["payer"] == payer.address


async def test_a_signed_subscriptions_charge_repeats_its_creation_signature(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, hooks: Receiver
) -> None:
    """A subscription created by a signed request: its period's paid webhook carries that
    request's signature and timestamp, and no API key."""
    owner: LocalAccount = Account.create()
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    payload = {"chainId": dev.chain_id, "tokenAddress": dev.token, "amount": "2.5"}
    payload |= {"periodSeconds": PERIOD_S, "webhookUrl": hooks.url("/signed")}
    signed = signed_headers(owner, "subscription.create", payload)
    answer = await app.http.post(
        "/integration/subscriptions",
        json={"ownerAddress": owner.address, **payload},
        headers=signed,
    )
    assert answer.status_code == 201, answer.text
    created = answer.json()
    payer = await funded_payer(evm, dev, 10_000_000)
    await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**18)])
    approve = encode_call(TEST_TOKEN, "approve", subscriptions_address(), 2**256 - 1)
    assert (await evm.transact(payer.key.hex(), dev.token, approve))["status"] == 1
    await authorized(app, payer, created)
    await settle_all(app.services)
    sub = await signed_get(
        app.http,
        "/integration/subscriptions/status",
        owner,
        "subscription.status",
        {"ownerAddress": owner.address, "id": created["id"]},
    )
    [charge] = sub.json()["subscription"]["charges"]
    seen = await signed_get(  # the lookup reads the escrow: the invoice is paid
        app.http,
        "/integration/invoices/status",
        owner,
        "invoice.status",
        {"ownerAddress": owner.address, "paymentAddress": charge["paymentAddress"]},
    )
    assert seen.json()["invoice"]["status"] == "paid", seen.text
    await record_then_deliver_due(app.services)

    [paid] = hooks.at("/signed")
    assert paid.body["subscription"] == {"id": created["id"], "period": 0}
    assert paid.body["paymentAddress"] == charge["paymentAddress"]
    assert paid.headers["x-service-signature"] == signed["x-service-signature"]
    assert paid.headers["x-service-timestamp"] == signed["x-service-timestamp"]
    assert "x-service-api-key" not in paid.headers
