"""Paying without gas: POST /pay/<paymentAddress>/authorization on anvil over real HTTP. A
payer holding TUSD and no native coin signs an EIP-3009 authorization and the relayer pays
the gas; every refusal is its documented 4xx with no transaction sent and no row written;
duplicates get one transaction; an authorization someone else submitted first still pays."""

from __future__ import annotations

import os
import uuid
from typing import Any

import httpx
import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from invoicing.chain.abi import encode_call, selector
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import TEST_TOKEN_EIP712, DevDeployment
from invoicing.chain.eip3009 import (
    Authorization,
    encode_transfer_with_authorization,
    transfer_typed_data,
)
from invoicing.chain.evm import EvmClient
from invoicing.payments.eip3009.models import GaslessStatus
from invoicing.tables.invoices import Invoice
from invoicing.tables.relay import RelayedAuthorization
from invoicing.tables.settlement import RelayerTransaction
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.factory import deploy_test_contract, sign_typed
from tests.support.gasless import (
    MINTER_KEY,
    body_for,
    funded_payer,
    gasless_rows,
    now_s,
    opted_in_invoice,
    sent_for,
)
from tests.support.server import serve
from tests.support.withdrawals import new_invoice, paid_invoice, reload, settle_all

pytestmark = pytest.mark.integration

OTHER_RELAYER_KEY = DEV_PRIVATE_KEYS[4]


def authorization_of(body: dict[str, Any]) -> Authorization:
    return Authorization(
        body["from"], body["to"], int(body["value"]), int(body["validAfter"]),
        int(body["validBefore"]), bytes.fromhex(body["nonce"][2:]),
    )  # fmt: skip


def post(app: RunningApp, invoice: Invoice, body: dict[str, Any]) -> Any:
    return app.http.post(f"/pay/{invoice.payment_address}/authorization", json=body)


async def signed_payment(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> tuple[str, Invoice, LocalAccount, dict[str, Any]]:
    """A new owner's opted-in invoice of 2.5 TUSD, a payer holding 3 TUSD and no native coin,
    and the payer's signed body for the amount due: (owner, invoice, payer, body)."""
    owner = Account.create().address
    invoice = await opted_in_invoice(app.services, owner)
    payer = await funded_payer(evm, dev, 3_000_000)
    return owner, invoice, payer, await body_for(evm, dev, payer, invoice)


async def test_a_payer_without_native_coin_pays_and_the_same_authorization_is_sent_once(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, invoice, payer, body = await signed_payment(app, evm, dev)

    first = await post(app, invoice, body)
    again = await post(app, invoice, body)

    assert first.status_code == 202, first.text
    answer = first.json()
    assert answer == {
        "txHash": answer["txHash"],
        "chainId": dev.chain_id,
        "payer": payer.address,
        "nonce": body["nonce"],
        "status": "submitted",
    }
    assert again.status_code == 202 and again.json()["txHash"] == answer["txHash"]
    assert await sent_for(services, owner) == 1
    await settle_all(services)
    assert await evm.get_balance(payer.address) == 0  # the payer paid no gas
    page = await app.http.get(f"/pay/{invoice.payment_address}/status")  # a live re-check
    assert page.json()["status"] == "paid"
    assert (await reload(services, invoice.id)).balance_raw == "2500000"
    (row,) = await gasless_rows(services, invoice.id)
    assert (row.status, row.tx_hash, row.payer) == (
        GaslessStatus.CONFIRMED,
        answer["txHash"],
        payer.address,
    )
    # Once confirmed, the same authorization still answers with its transaction.
    third = await post(app, invoice, body)
    assert third.status_code == 202
    assert third.json() == {**answer, "status": "confirmed"}
    assert await sent_for(services, owner) == 1


async def expect_refused(
    app: RunningApp,
    invoice: Invoice,
    owner: str,
    body: dict[str, Any],
    status: int,
    code: str,
    field: str | None = None,
) -> dict[str, Any]:
    """The answer is ``status``/``code`` (``details.field``), and nothing was sent or written."""
    before = await sent_for(app.services, owner)
    answer = await post(app, invoice, body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text
    if field is not None:
        assert answer.json()["error"]["details"]["field"] == field
    assert await sent_for(app.services, owner) == before
    assert await gasless_rows(app.services, invoice.id) == []
    error: dict[str, Any] = answer.json()["error"]
    return error


async def test_every_refusal_sends_nothing(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner = Account.create().address
    invoice = await opted_in_invoice(services, owner)
    payer = await funded_payer(evm, dev, 3_000_000)
    due = int(invoice.required_raw)

    async def refused(
        status: int, code: str, field: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        body = await body_for(evm, dev, payer, invoice, **kw)
        return await expect_refused(app, invoice, owner, body, status, code, field)

    # The signature: another wallet's, or a wallet that is not the payer.
    await refused(400, "invalid_authorization", "signature", signer=Account.create())
    # The domain and chain: signed for chain 1 (the body names the invoice's chain).
    await refused(400, "invalid_authorization", "signature", chain_id=1)
    wrong_chain = await body_for(evm, dev, payer, invoice)
    error = await expect_refused(
        app, invoice, owner, {**wrong_chain, "chainId": 1}, 400, "invalid_authorization", "chainId"
    )
    assert error["details"]["expected"] == dev.chain_id
    other_token = {**wrong_chain, "tokenAddress": dev.factory}
    await expect_refused(
        app, invoice, owner, other_token, 400, "invalid_authorization", "tokenAddress"
    )
    # `to` is this escrow.
    await refused(400, "invalid_authorization", "to", to=Account.create().address)
    # The value is the amount due.
    error = await refused(400, "invalid_authorization", "value", value=due - 1)
    assert error["details"]["expected"] == str(due)
    await refused(400, "invalid_authorization", "value", value=due + 1)
    # The validity window: not yet valid, too short, too long, over.
    await refused(400, "invalid_authorization", "validAfter", after=120)
    await refused(400, "invalid_authorization", "validBefore", before=10)
    await refused(400, "invalid_authorization", "validBefore", before=7200)
    await refused(400, "invalid_authorization", "validBefore", after=-600, before=-300)
    # The payer's balance.
    poor = await funded_payer(evm, dev, due - 1)
    body = await body_for(evm, dev, poor, invoice)
    error = await expect_refused(app, invoice, owner, body, 400, "insufficient_balance")
    assert error["details"] == {"balanceRaw": str(due - 1), "value": str(due)}
    # Malformed bodies.
    good = await body_for(evm, dev, payer, invoice)
    for bad in (
        {**good, "value": 5},
        {**good, "nonce": "0x1234"},
        {**good, "from": "0xnope"},
        {k: v for k, v in good.items() if k != "signature"},
        {**good, "extra": 1},
        {**good, "signature": "nothex"},
    ):
        code = (await post(app, invoice, bad)).json()["error"]["code"]
        assert code in ("invalid_request", "invalid_authorization")
    assert await sent_for(services, owner) == 0
    # The invoice takes payments: a deleted one does not.
    gone = await opted_in_invoice(services, owner, "1")
    async with services.db.transaction() as session:
        row = await session.get(Invoice, gone.id)
        assert row is not None
        row.deleted_at = services.clock.now_ms()
        row.status = "cancelled"
    body = await body_for(evm, dev, payer, gone)
    await expect_refused(app, gone, owner, body, 409, "invoice_not_payable")


async def test_off_by_default_and_per_chain(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner = Account.create()
    token = dev.token
    invoice = await new_invoice(services, owner.address, "1", token)
    payer = await funded_payer(evm, dev, 1_000_000)
    body = await body_for(evm, dev, payer, invoice)
    await expect_refused(app, invoice, owner.address, body, 400, "gasless_unavailable")
    page = await app.http.get(f"/pay/{invoice.payment_address}")
    assert 'id="gasless"' not in page.text and "data-gasless-name" not in page.text

    api_key = await issue_api_key(services, owner)
    query = {"ownerAddress": owner.address, "chainId": dev.chain_id}
    got = await app.http.get("/integration/gasless", params=query, headers=key_headers(api_key))
    assert got.json() == {"chainId": dev.chain_id, "enabled": False, "tokens": [dev.token]}
    on = await app.http.post(
        "/integration/gasless", json={**query, "enabled": True}, headers=key_headers(api_key)
    )
    assert on.json() == {"chainId": dev.chain_id, "enabled": True, "tokens": [dev.token]}
    page = await app.http.get(f"/pay/{invoice.payment_address}")
    assert 'id="gasless"' in page.text
    assert 'data-gasless-name="Test USD" data-gasless-version="1"' in page.text
    assert (await post(app, invoice, body)).status_code == 202
    # Another owner's key cannot turn it on for this owner; an unknown chain is refused.
    stranger = await issue_api_key(services, Account.create())
    denied = await app.http.post(
        "/integration/gasless", json={**query, "enabled": False}, headers=key_headers(stranger)
    )
    assert denied.status_code == 403
    unknown = await app.http.get(
        "/integration/gasless", params={**query, "chainId": 999}, headers=key_headers(api_key)
    )
    assert unknown.json()["error"]["code"] == "unsupported_chain"
    native = await new_invoice(services, owner.address, "1")
    await expect_refused(
        app,
        native,
        owner.address,
        await body_for(evm, dev, payer, native),
        400,
        "gasless_unavailable",
    )


async def test_an_authorization_someone_else_submitted_first_still_pays(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, invoice, payer, body = await signed_payment(app, evm, dev)
    auth = authorization_of(body)
    call = encode_transfer_with_authorization(auth, bytes.fromhex(body["signature"][2:]))
    assert (await evm.transact(OTHER_RELAYER_KEY, dev.token, call))["status"] == 1

    error = await expect_refused(app, invoice, owner, body, 409, "invoice_not_payable")

    assert error["details"] == {"status": "paid"}
    # Noticed at once: the refusal re-read the escrow.
    assert (await reload(services, invoice.id)).status == "paid"


async def test_a_canceled_authorization_is_refused_as_used(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, invoice, payer, body = await signed_payment(app, evm, dev)
    auth = authorization_of(body)
    typed = transfer_typed_data(TEST_TOKEN_EIP712, dev.chain_id, dev.token, auth)
    typed["types"]["CancelAuthorization"] = [
        {"name": "authorizer", "type": "address"},
        {"name": "nonce", "type": "bytes32"},
    ]
    del typed["types"]["TransferWithAuthorization"]
    typed["primaryType"] = "CancelAuthorization"
    typed["message"] = {"authorizer": payer.address, "nonce": body["nonce"]}
    cancel = selector("cancelAuthorization(address,bytes32,bytes)") + encode(
        ["address", "bytes32", "bytes"], [payer.address, auth.nonce, sign_typed(payer.key, typed)]
    )
    assert (await evm.transact(OTHER_RELAYER_KEY, dev.token, cancel))["status"] == 1

    await expect_refused(app, invoice, owner, body, 409, "authorization_used")
    assert (await reload(services, invoice.id)).status == "pending"


async def test_a_second_payer_waits_while_one_payment_is_pending(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner = Account.create().address
    invoice = await opted_in_invoice(services, owner)
    first = await funded_payer(evm, dev, 3_000_000)
    second = await funded_payer(evm, dev, 3_000_000)
    await evm.call_rpc("evm_setAutomine", [False])
    try:
        accepted = await post(app, invoice, await body_for(evm, dev, first, invoice))
        assert accepted.status_code == 202
        body = await body_for(evm, dev, second, invoice)
        answer = await post(app, invoice, body)
        assert answer.status_code == 409
        assert answer.json()["error"]["code"] == "invoice_not_payable"
        assert answer.json()["error"]["details"]["txHash"] == accepted.json()["txHash"]
    finally:
        await evm.call_rpc("evm_setAutomine", [True])
    await settle_all(services)
    assert await sent_for(services, owner) == 1


async def test_a_flood_from_fresh_wallets_costs_no_more_than_the_owners_share(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    """Strangers with fresh wallets (each holding the amount, as a real payer would) flood
    one owner's invoices: the relayer sends what the owner's share of the day allows, each
    transaction within the gas cap, and refuses the rest with 429 before any estimate."""
    services = await make_services(relayer_owner_tx_per_day=3, relayer_owner_gas_per_day=10**6)
    owner = Account.create().address
    await paid_invoice(services, evm, owner, "0.001")  # an owner of its own share
    invoices = [await opted_in_invoice(services, owner, "0.5") for _ in range(6)]
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        answers = []
        for invoice in invoices:
            payer = await funded_payer(evm, dev, 500_000)
            body = await body_for(evm, dev, payer, invoice)
            answers.append(
                await http.post(f"/pay/{invoice.payment_address}/authorization", json=body)
            )

    assert [a.status_code for a in answers] == [202, 202, 202, 429, 429, 429]
    assert {a.json()["error"]["code"] for a in answers[3:]} == {"rate_limited"}
    async with services.db.sessions() as session:
        gas = await session.scalars(
            select(RelayerTransaction.gas).where(RelayerTransaction.owner_key == owner.lower())
        )
        limits = list(gas)
    assert len(limits) == 3
    assert all(limit <= services.settings.relayer_meta_gas_limit for limit in limits)
    await settle_all(services)


async def test_a_wallet_that_signs_only_at_gas_price_zero_is_refused_before_anything_is_sent(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    """A payer contract whose ``isValidSignature`` answers yes only while ``tx.gasprice`` is 0
    passes a simulation sent without fee fields and reverts when sent, at the owner's cost.
    The simulation runs at the price the transaction will pay: refused, nothing sent."""
    services = app.services
    owner = Account.create().address
    invoice = await opted_in_invoice(services, owner)
    wallet = await deploy_test_contract(evm, "GasPriceWallet")
    mint = encode_call(TEST_TOKEN, "mint", wallet, int(invoice.required_raw))
    assert (await evm.transact(MINTER_KEY, dev.token, mint))["status"] == 1
    now = await now_s(evm)
    body = {
        "chainId": dev.chain_id, "tokenAddress": dev.token, "from": wallet,
        "to": invoice.payment_address, "value": invoice.required_raw,
        "validAfter": str(now - 120), "validBefore": str(now + 600),
        "nonce": "0x" + os.urandom(32).hex(), "signature": "0x" + "00" * 66,
    }  # fmt: skip

    answers = [await post(app, invoice, body) for _ in range(3)]

    assert [a.status_code for a in answers] == [400] * 3
    assert {a.json()["error"]["code"] for a in answers} == {"invalid_authorization"}
    assert answers[0].json()["error"]["details"]["field"] == "signature"
    assert await sent_for(services, owner) == 0
    assert await gasless_rows(services, invoice.id) == []


async def failed_payments(services: Any, payer: str, token: str, count: int) -> None:
    """``count`` relayed payments of ``payer`` that failed on chain today, as the relayer's
    finality leaves them (a transaction and the seam's row, both failed)."""
    now_ms = services.clock.now_ms()
    chain_id = services.chains.all()[0].config.chain_id
    async with services.db.transaction() as session:
        for nonce in range(count):
            tx_hash = "0x" + os.urandom(32).hex()
            row = RelayerTransaction(
                id=str(uuid.uuid4()), chain_id=chain_id, sender=payer, nonce=nonce,
                purpose="gasless", to_address=token, data="0x", value="0", gas=100_000,
                max_fee_per_gas="1", max_priority_fee_per_gas="1", tx_hash=tx_hash,
                raw_tx="0x", hashes=[tx_hash], status="failed", attempts=1, sent_at=now_ms,
                created_at=now_ms, updated_at=now_ms,
            )  # fmt: skip
            session.add(row)
            await session.flush()
            session.add(
                RelayedAuthorization(
                    relayer_tx_id=row.id, chain_id=chain_id, token=token, payer=payer,
                    nonce="0x" + os.urandom(32).hex(), method="eip3009", owner_key="0x",
                    request_hash="0x", tx_hash=tx_hash, status=GaslessStatus.FAILED,
                    created_at=now_ms, updated_at=now_ms,
                )
            )  # fmt: skip


async def test_a_payer_whose_payments_failed_on_chain_is_carried_no_more_that_day(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    """A payer contract that passes every simulation and reverts when sent costs the relayer
    at most ``relayer_payer_failures_per_day`` transactions a day, not the owner's share."""
    services = app.services
    owner, invoice, payer, body = await signed_payment(app, evm, dev)
    limit = services.settings.relayer_payer_failures_per_day
    await failed_payments(services, payer.address, dev.token, limit)

    refused = await post(app, invoice, body)

    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limited"
    assert await sent_for(services, owner) == 0
    assert await gasless_rows(services, invoice.id) == []
