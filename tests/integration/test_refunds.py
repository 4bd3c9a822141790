"""Gasless refunds through POST /integration/invoices/refund-meta, on anvil over real HTTP:
exact balances, the invoice's status untouched, ``refunds`` on owner representations, every
rejection in its documented order with nothing sent, refunds and sweeps never racing, and
ethers.js signatures through both auth modes."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.settlement.budget import Spender
from invoicing.settlement.candidates import Batch
from invoicing.settlement.withdrawals import plan_withdrawals, read_planning, sweep_batch
from invoicing.tables.invoices import Invoice
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.odd_values import ODD_VALUES
from tests.support.refunds import REFUND, deadline, expire, refund_body, refund_rows
from tests.support.signing import new_owner, signed_headers
from tests.support.withdrawals import (
    balance_of,
    gateway,
    new_invoice,
    paid_invoice,
    pay,
    relayer_of,
    relayer_tx_count,
    reload,
    settle_all,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
REFUND_CLIENT = REPO_ROOT / "tests" / "js" / "refund_client.mjs"


async def expired_invoice(
    services: Services, evm: EvmClient, owner: str, amount: str, paid: int, token: str | None = None
) -> Invoice:
    """A new invoice of ``owner`` for ``amount`` (of ``token``), paid ``paid`` raw, expired."""
    invoice = await new_invoice(services, owner, amount, token)
    await pay(evm, invoice, paid)
    return await expire(services, invoice)


async def refund_parties(services: Services) -> tuple[LocalAccount, str, str]:
    """A new owner, a new payer's address (to refund to), and the owner's API key."""
    owner = new_owner()
    return owner, new_owner().address, await issue_api_key(services, owner)


async def lookup(app: RunningApp, api_key: str, owner: str, invoice: Invoice) -> dict[str, Any]:
    answer = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner, "paymentAddress": invoice.payment_address},
        headers=key_headers(api_key),
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()["invoice"]
    return found


async def sweep(services: Services, owner: str) -> list[Any]:
    return await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )


async def test_a_partially_paid_expired_invoice_is_refunded_in_full(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await expired_invoice(services, evm, owner.address, "0.01", 4 * 10**15)
    body = await refund_body(evm, dev, owner, invoice, payer, 4 * 10**15)

    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))

    assert answer.status_code == 202, answer.text
    tx_hash = answer.json()["txHash"]
    assert answer.json() == {
        "txHash": tx_hash,
        "chainId": dev.chain_id,
        "ownerAddress": owner.address,
        "nonce": "0",
        "status": "submitted",
    }
    submitted = await lookup(app, api_key, owner.address, invoice)
    assert [r["status"] for r in submitted["refunds"]] == ["submitted"]
    await settle_all(services)
    assert await balance_of(evm, payer) == 4 * 10**15
    assert await balance_of(evm, invoice.payment_address) == 0
    assert await balance_of(evm, owner.address) == 0
    shown = await lookup(app, api_key, owner.address, invoice)
    assert shown["status"] == "expired"  # a refund leaves the invoice's status alone
    assert shown["refunds"] == [
        {
            "txHash": tx_hash,
            "to": payer,
            "tokenAddress": None,
            "amountRaw": "4000000000000000",
            "status": "confirmed",
            "createdAt": shown["refunds"][0]["createdAt"],
        }
    ]
    listed = await app.http.get(
        "/integration/invoices",
        params={"ownerAddress": owner.address},
        headers=key_headers(api_key),
    )
    assert [item["refunds"] for item in listed.json()["items"]] == [shown["refunds"]]
    public = await app.http.get(f"/pay/{invoice.payment_address}/status")
    assert public.status_code == 200 and "refunds" not in public.json()
    assert await sweep(services, owner.address) == []  # nothing left to sweep


async def test_an_overpaid_token_invoice_excess_is_refunded_then_the_rest_swept(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await new_invoice(services, owner.address, "10", dev.token)
    await pay(evm, invoice, 12_500_000)
    assert (await recheck_invoice(services, invoice)).status == "paid"
    body = await refund_body(evm, dev, owner, invoice, payer, 2_500_000)

    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    assert answer.status_code == 202, answer.text
    # The sweep skips an escrow while its refund is pending (mined here, not yet followed).
    assert await sweep(services, owner.address) == []
    await settle_all(services)

    assert await balance_of(evm, payer, dev.token) == 2_500_000
    assert await balance_of(evm, invoice.payment_address, dev.token) == 10_000_000
    assert (await reload(services, invoice.id)).status == "paid"
    (sent,) = await sweep(services, owner.address)
    await settle_all(services)
    assert await balance_of(evm, owner.address, dev.token) == 10_000_000
    assert await balance_of(evm, invoice.payment_address, dev.token) == 0
    shown = await lookup(app, api_key, owner.address, invoice)
    assert (shown["status"], shown["withdrawn"]) == ("completed", True)
    assert [(r["tokenAddress"], r["amountRaw"], r["status"]) for r in shown["refunds"]] == [
        (dev.token, "2500000", "confirmed")
    ]

    # A completed invoice's funds are with the owner: its escrow holds nothing to refund.
    before = await relayer_tx_count(services)
    late = await refund_body(evm, dev, owner, invoice, payer, 1, nonce=1)
    refused = await app.http.post(REFUND, json=late, headers=key_headers(api_key))
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "insufficient_balance"
    assert refused.json()["error"]["details"] == {"balanceRaw": "0", "amountRaw": "1"}
    assert await relayer_tx_count(services) == before
    assert len(await refund_rows(services, invoice.id)) == 1


async def test_an_overpaid_native_invoice_excess_is_refunded_and_the_rest_paid_to_the_owner(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await new_invoice(services, owner.address, "0.01")
    await pay(evm, invoice, 15 * 10**15)
    assert (await recheck_invoice(services, invoice)).status == "paid"
    body = await refund_body(evm, dev, owner, invoice, payer, 5 * 10**15, token=None)

    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    assert answer.status_code == 202, answer.text
    await settle_all(services)

    # The factory pays the rest of a native refund to the owner as a sweep would.
    assert await balance_of(evm, payer) == 5 * 10**15
    assert await balance_of(evm, owner.address) == 10**16
    assert await balance_of(evm, invoice.payment_address) == 0
    done = await reload(services, invoice.id)
    assert (done.status, done.withdrawn, done.swept_raw) == ("completed", True, str(10**16))
    shown = await lookup(app, api_key, owner.address, invoice)
    assert [(r["tokenAddress"], r["status"]) for r in shown["refunds"]] == [(None, "confirmed")]
    assert await sweep(services, owner.address) == []


async def test_every_rejection_in_order_sends_nothing(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, other, stranger, payer = new_owner(), new_owner(), new_owner(), new_owner().address
    api_key = await issue_api_key(services, owner)
    invoice = await new_invoice(services, owner.address, "0.01")
    await pay(evm, invoice, 4 * 10**15)
    still_pending = await refund_body(evm, dev, owner, invoice, payer, 10**15)
    others = await new_invoice(services, other.address, "0.01")
    await pay(evm, others, 10**15)
    past = int(time.time()) - 60
    before = await relayer_tx_count(services)

    async def post(body: dict[str, Any], key: str = api_key) -> tuple[int, str]:
        answer = await app.http.post(REFUND, json=body, headers=key_headers(key))
        return answer.status_code, answer.json()["error"]["code"]

    pending_answer = await post(still_pending)
    invoice = await expire(services, invoice)
    # Each request fails every check from its own on: the first one answers.
    not_owners = await refund_body(
        evm, dev, owner, others, payer, 10**15, deadline_s=past, signer=stranger
    )
    unknown = {**not_owners, "paymentAddress": new_owner().address}
    unlisted = await refund_body(
        evm, dev, owner, invoice, payer, 10**15, token=new_owner().address, deadline_s=past
    )
    expired = await refund_body(
        evm, dev, owner, invoice, payer, 10**15, deadline_s=past, signer=stranger, nonce=7
    )
    wrong_signer = await refund_body(
        evm, dev, owner, invoice, payer, 10**18, signer=stranger, nonce=7
    )
    wrong_nonce = await refund_body(evm, dev, owner, invoice, payer, 10**18, nonce=7)
    too_much = await refund_body(evm, dev, owner, invoice, payer, 4 * 10**15 + 1)
    other_asset = await refund_body(evm, dev, owner, invoice, payer, 1, token=dev.token)
    in_seconds = await deadline(evm)
    ms_deadline = await refund_body(
        evm, dev, owner, invoice, payer, 4 * 10**15 + 1, deadline_s=in_seconds
    )
    ms_deadline["deadline"] = str(in_seconds * 1000)  # signed in seconds, sent in ms
    signed_in_ms = await refund_body(
        evm, dev, owner, invoice, payer, 10**15, deadline_s=in_seconds * 1000
    )

    assert [
        await post(not_owners),
        await post(unknown),
        await post(unlisted),
        await post(expired),
        await post(wrong_signer),
        await post(wrong_nonce),
        await post(too_much),
        await post(other_asset),
        await post(ms_deadline),
    ] == [
        (404, "not_found"),
        (404, "not_found"),
        (400, "unsupported_token"),
        (400, "deadline_expired"),
        (400, "invalid_owner_signature"),
        (409, "nonce_mismatch"),
        (400, "insufficient_balance"),
        (400, "insufficient_balance"),
        (400, "insufficient_balance"),  # a deadline in ms is read as seconds
    ]
    assert pending_answer == (409, "invoice_pending")
    mismatch = await app.http.post(REFUND, json=wrong_nonce, headers=key_headers(api_key))
    assert mismatch.json()["error"]["details"] == {"expected": "0"}
    # As for the fee settings (one pipeline): a signature over the milliseconds is named.
    over_ms = await app.http.post(REFUND, json=signed_in_ms, headers=key_headers(api_key))
    assert (over_ms.status_code, over_ms.json()["error"]["code"]) == (
        400,
        "invalid_owner_signature",
    )
    assert over_ms.json()["error"]["details"] == {"signedDeadline": str(in_seconds)}
    short = await app.http.post(REFUND, json=too_much, headers=key_headers(api_key))
    assert short.json()["error"]["details"] == {
        "balanceRaw": "4000000000000000",
        "amountRaw": "4000000000000001",
    }

    valid = await refund_body(evm, dev, owner, invoice, payer, 10**15)
    malformed = [
        {**valid, "amountRaw": "0"},
        {**valid, "amountRaw": "-1"},
        {**valid, "amountRaw": "1.5"},
        {**valid, "amountRaw": "１"},  # a non-ASCII digit
        {**valid, "amountRaw": 10**15},
        {**valid, "amountRaw": str(2**256)},
        {**valid, "nonce": "1e3"},
        {**valid, "deadline": ""},
        {**valid, "to": "0x0000000000000000000000000000000000000000"},
        {**valid, "to": "0xabc"},
        {**valid, "tokenAddress": "nope"},
        {**valid, "to": invoice.payment_address},
        {key: value for key, value in valid.items() if key != "to"},
    ]
    assert [await post(body) for body in malformed] == [(400, "invalid_request")] * len(malformed)
    other_key = await issue_api_key(services, other)
    assert await post(valid, other_key) == (403, "forbidden")
    no_auth = await app.http.post(REFUND, json=valid)
    assert no_auth.status_code == 401

    assert await relayer_tx_count(services) == before
    assert await refund_rows(services, invoice.id, others.id) == []
    assert await balance_of(evm, invoice.payment_address) == 4 * 10**15
    assert await balance_of(evm, payer) == 0


async def test_a_pending_invoice_is_not_refunded_so_its_payment_still_counts(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    """Paid in full, not yet read: a refund would leave less than requiredRaw in the escrow
    and the payer's payment would not count. It is refused, and the payment counts."""
    services = app.services
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    invoice = await new_invoice(services, owner.address, "0.01")
    await pay(evm, invoice, 10**16)
    body = await refund_body(evm, dev, owner, invoice, owner.address, 10**16)
    before = await relayer_tx_count(services)

    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    await settle_all(services)

    assert answer.status_code == 409, answer.text
    assert answer.json()["error"] == {
        "code": "invoice_pending",
        "message": "this invoice is still pending: refund once it is paid or expired "
        "(or cancel it first)",
        "details": {"status": "pending"},
    }
    assert await relayer_tx_count(services) == before
    assert await refund_rows(services, invoice.id) == []
    assert await balance_of(evm, invoice.payment_address) == 10**16
    assert (await recheck_invoice(services, await reload(services, invoice.id))).status == "paid"
    # Paid, the same signed refund goes through.
    again = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    assert again.status_code == 202, again.text


async def test_an_identical_repeat_gets_the_same_transaction(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await expired_invoice(services, evm, owner.address, "10", 3_000_000, dev.token)
    body = await refund_body(evm, dev, owner, invoice, payer, 3_000_000)
    before = await relayer_tx_count(services)

    first = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    again = await app.http.post(REFUND, json=body, headers=key_headers(api_key))

    assert (first.status_code, again.status_code) == (202, 202), again.text
    assert first.json() == again.json()
    assert await relayer_tx_count(services) == before + 1
    assert [r.tx_hash for r in await refund_rows(services, invoice.id)] == [first.json()["txHash"]]
    await settle_all(services)
    assert await balance_of(evm, payer, dev.token) == 3_000_000


async def test_a_refund_is_refused_while_a_sweep_of_the_escrow_is_pending(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await paid_invoice(services, evm, owner.address, "0.01")
    (sent,) = await sweep(services, owner.address)  # pending until the tracker follows it
    body = await refund_body(evm, dev, owner, invoice, payer, 10**15)
    before = await relayer_tx_count(services)

    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))

    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "sweep_in_progress"
    assert await relayer_tx_count(services) == before
    assert await refund_rows(services, invoice.id) == []
    await settle_all(services)
    assert await balance_of(evm, owner.address) == 10**16
    assert await balance_of(evm, payer) == 0


async def ethers_refund(
    app: RunningApp, owner: LocalAccount, dev: DevDeployment, invoice: Invoice, mode: str,
    body: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """Run the ethers.js client (the app answers on this event loop meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        "node", str(REFUND_CLIENT), app.base_url, owner.key.to_0x_hex(), dev.factory,
        invoice.salt, mode, json.dumps(body),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO_ROOT,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 0, stderr.decode()
    answer: dict[str, Any] = json.loads(stdout)
    return answer


async def test_ethers_signed_refunds_through_both_auth_modes(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await expired_invoice(services, evm, owner.address, "10", 3_000_000, dev.token)
    common = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "paymentAddress": invoice.payment_address,
        "to": payer,
        "deadline": str(await deadline(evm)),
    }

    by_key = await ethers_refund(
        app, owner, dev, invoice, f"apikey:{api_key}",
        {**common, "amountRaw": "1000000", "nonce": "0", "invoiceToken": dev.token},
    )  # fmt: skip
    assert by_key["status"] == 202, by_key
    await settle_all(services)
    by_signature = await ethers_refund(
        app, owner, dev, invoice, "signature",
        {**common, "amountRaw": "2000000", "tokenAddress": dev.token, "nonce": "1"},
    )  # fmt: skip
    assert by_signature["status"] == 202, by_signature
    await settle_all(services)

    assert (by_key["body"]["nonce"], by_signature["body"]["nonce"]) == ("0", "1")
    assert await balance_of(evm, payer, dev.token) == 3_000_000
    assert await balance_of(evm, invoice.payment_address, dev.token) == 0
    listed = await app.http.get(
        "/integration/invoices",
        params={"ownerAddress": owner.address, "chainId": str(dev.chain_id)},
        headers=signed_headers(owner, "invoice.list", {"chainId": str(dev.chain_id)}),
    )
    (item,) = listed.json()["items"]
    assert item["status"] == "expired"
    assert [(r["txHash"], r["amountRaw"], r["status"]) for r in item["refunds"]] == [
        (by_key["body"]["txHash"], "1000000", "confirmed"),
        (by_signature["body"]["txHash"], "2000000", "confirmed"),
    ]


async def test_a_withdrawal_claim_skips_an_escrow_whose_refund_is_pending(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    """Planned before the refund, claimed after it: the claim under the relayer lock sees
    the pending refund and sends nothing."""
    services = app.services
    owner, payer, api_key = await refund_parties(services)
    invoice = await paid_invoice(services, evm, owner.address, "0.01")
    chain, relayer = gateway(services), relayer_of(services)
    now_ms = services.clock.now_ms()
    planning = await read_planning(services, chain, relayer, [invoice], now_ms)
    body = await refund_body(evm, dev, owner, invoice, payer, 10**15)
    answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
    assert answer.status_code == 202, answer.text
    before = await relayer_tx_count(services)

    batch = Batch(owner.address, None, [invoice], dev.factory)
    assert await sweep_batch(planning, batch, Spender.owner(owner.address)) == []

    assert await relayer_tx_count(services) == before
    await settle_all(services)
    assert await balance_of(evm, payer) == 10**15
    assert await balance_of(evm, owner.address) == 9 * 10**15


async def test_odd_refund_bodies_get_4xx_and_send_nothing(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    services = app.services
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    invoice = await expired_invoice(services, evm, owner.address, "0.01", 10**15)
    valid = await refund_body(evm, dev, owner, invoice, new_owner().address, 10**15)
    before = await relayer_tx_count(services)

    statuses = set()
    for field in [key for key in valid if key != "ownerAddress"]:
        for value in [*ODD_VALUES, "0x" + "ab" * 65, "0x" + "ab" * 3000]:
            body = {**valid, field: value}
            answer = await app.http.post(REFUND, json=body, headers=key_headers(api_key))
            assert 400 <= answer.status_code < 500, (field, value, answer.text)
            assert set(answer.json()) == {"error"}
            statuses.add(answer.status_code)

    assert statuses <= {400, 404, 409, 413}
    assert await relayer_tx_count(services) == before
    assert await refund_rows(services, invoice.id) == []
